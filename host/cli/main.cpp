// spindle: the command-line front end. Exit codes: 0 success, 1 a gate failed, 2 an error
// (bad input, a missing file, an inconsistent model); CLI11's own codes for usage errors.
#include <exception>
#include <iostream>

#include "host/cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"Spindle: single-batch LLM decode as a task graph, on sequential, threaded and "
               "GPU executors.",
               "spindle"};
  app.footer("Exit status: 0 success, 1 a gate failed, 2 an error.");
  app.require_subcommand(1);
  int status = 0;
  spindle::cli::add_run_command(app);
  spindle::cli::add_gate_commands(app, status);
  spindle::cli::add_graph_commands(app);
  spindle::cli::add_synth_command(app);
  spindle::cli::add_info_command(app);
  spindle::cli::add_bench_command(app);
  spindle::cli::add_trace_command(app);
  try {
    app.parse(argc, argv);  // runs the chosen command's callback
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::cerr << "spindle: error: " << e.what() << "\n";
    return 2;
  }
  return status;
}

// spindle: the command-line front end. Exit codes: 0 success (--help included), 1 a gate
// failed, 2 an error: a usage error (an unknown option, a bad value, a missing command), bad
// input, a missing file, an inconsistent model.
#include <exception>
#include <iostream>

#include "host/cli/commands.h"
#include "host/cli/options.h"
#include "host/cli/tuning.h"

int main(int argc, char** argv) {
  CLI::App app{"Spindle: single-batch LLM decode as a task graph, on sequential, threaded and "
               "GPU executors.",
               "spindle"};
  app.footer("Exit status: 0 success, 1 a gate failed, 2 an error (a usage error included).");
  app.require_subcommand(1);
  int status = 0;
  spindle::cli::add_run_command(app);
  spindle::cli::add_gate_commands(app, status);
  spindle::cli::add_graph_commands(app);
  spindle::cli::add_synth_command(app);
  spindle::cli::add_info_command(app);
  spindle::cli::add_bench_command(app);
  spindle::cli::add_trace_command(app);
  spindle::cli::add_text_commands(app);
  spindle::cli::add_tune_command(app);
  spindle::cli::check_number_spellings(app);
  try {
    app.parse(argc, argv);  // runs the chosen command's callback
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the help, or the usage error with a pointer to --help; its own codes for
    // the errors (104-109) would break the documented three.
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const std::exception& e) {
    std::cerr << "spindle: error: " << e.what() << "\n";
    return 2;
  }
  return status;
}

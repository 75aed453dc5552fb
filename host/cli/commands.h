// The `spindle` subcommands. Each add_* registers its command(s) on the app. Errors are thrown
// as spindle::Error and reported by main (exit code 2); a gate sets `status` to 1 when it fails.
#pragma once
#include <CLI/CLI.hpp>

namespace spindle::cli {

void add_run_command(CLI::App& app);
void add_gate_commands(CLI::App& app, int& status);
void add_graph_commands(CLI::App& app);
void add_synth_command(CLI::App& app);
void add_info_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_trace_command(CLI::App& app);
void add_text_commands(CLI::App& app);  // tokenize, detokenize

}  // namespace spindle::cli

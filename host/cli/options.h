// Options several commands share, and the parsing that goes with them.
#pragma once
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json_fwd.hpp>

#include "host/executor.h"
#include "host/cli/tuning.h"
#include "host/graph_builder.h"

namespace spindle::cli {

inline constexpr const char* kDefaultModel = "synthetic:qwen3-0.6b";

// An unsigned option that shows its default and refuses values outside [lo, hi], naming the range.
CLI::Option* add_ranged_option(CLI::App& cmd, const std::string& name, uint32_t& value, const std::string& help,
                               uint32_t lo, uint32_t hi);

// --model, defaulting to kDefaultModel.
void add_model_option(CLI::App& cmd, std::string& model);

// --context; `when_zero` says what the command does without it.
CLI::Option* add_context_option(CLI::App& cmd, uint32_t& context, const std::string& when_zero);

// --copy-gib: the size of the copy that measures the bandwidth ceiling (host/cli/ceiling.h), in
// GiB from 1/1024 (1 MiB) to 64; the default is copy_gib's value.
void add_copy_option(CLI::App& cmd, double& copy_gib);

// --graph FILE: a saved graph (.sptg) instead of one built for the model, `help` saying what the
// command does with it; refused together with any of `build_options` (those that build one).
CLI::Option* add_graph_file_option(CLI::App& cmd, std::string& file, const std::string& help,
                                   const std::vector<CLI::Option*>& build_options);

// How a graph built here is split over devices (BuildOptions::devices, expert_parallel).
struct DeviceSplit {
  uint32_t devices = BuildOptions{}.devices;
  bool expert_parallel = BuildOptions{}.expert_parallel;
  void apply_to(BuildOptions& build) const {
    build.devices = devices;
    build.expert_parallel = expert_parallel;
  }
};

// The graph a command runs: the one saved in `file`, or one built for the model (its tiling
// from --tune) at `context` positions (0 = as many as the command needs).
struct GraphSource {
  std::string file;
  uint32_t context = 0;
};

// --context (`context_when_zero` says what 0 does) and --graph, which runs a saved graph with
// --model's weights and refuses --context (open_profiled_session refuses --tune's tiling knobs).
void add_graph_source_options(CLI::App& cmd, GraphSource& source, const std::string& context_when_zero);

// The executor's names as given on the command line; checked when the command runs.
struct ExecutorFlags {
  std::string profile = "fastest";  // resolved by open_profiled_session (host/cli/session.h)
  TuneSettings tune;                // the tiling and executor knobs
  std::string executor = "auto";
  uint32_t workers = ExecutorOptions{}.workers;
  std::string schedule = schedule_kind_name(ExecutorOptions{}.schedule);
  uint32_t watchdog_ms = ExecutorOptions{}.watchdog_ms;
  int32_t device = ExecutorOptions{}.device;
  DeviceSplit split;  // applied by open_profiled_session
};

// --devices and --expert-parallel: BuildOptions::devices and expert_parallel.
std::vector<CLI::Option*> add_device_split_options(CLI::App& cmd, DeviceSplit& split);

// --profile, --tune, --executor, --workers, --schedule, --watchdog-ms, --device, --devices,
// --expert-parallel.
void add_executor_options(CLI::App& cmd, ExecutorFlags& flags);

// With --tune's executor knobs applied. Throws spindle::Error listing the valid names for an
// unknown one.
ExecutorOptions executor_options(const ExecutorFlags& flags);

// Every whole-number option of `app` and of its commands, however deep, reads its value in
// decimal, as the lists' items are (CLI11 alone reads "0x10" as 16, "010" as 8, and "-1" or
// 2^64 as 2^64 - 1): leading zeros are dropped and any other spelling is refused. Every
// real-number option refuses NaN, which passes every range check.
void check_number_spellings(CLI::App& app);

// "a,b,,c" → {"a", "b", "", "c"}: the items as given, empty ones kept for the caller to refuse.
std::vector<std::string> split_list(const std::string& list);

// "1,2,3" → {1, 2, 3}: whole numbers from 0 to 2^32 - 1 in decimal, separated by commas and
// nothing else. Throws spindle::Error naming `option` and the item that is not one, `what`
// saying what the items are ("token id", "position").
std::vector<uint32_t> parse_uint32_list(const std::string& list, const std::string& option, const std::string& what);

// The context a run needs, `positions` (summed in 64 bits from the command's numbers, which
// `from` names with their values). Throws spindle::Error quoting them when it is more than a
// context can hold (2^32 - 1 positions).
uint32_t needed_context(uint64_t positions, const std::string& from);

// The output file `option` names: a path that is not empty, not a directory, in a directory
// that exists. Checked as the command line is parsed, before any work.
CLI::Validator output_file();

// The input file `option` names: not a directory (a missing file is left to its reader, which
// names it).
CLI::Validator input_file();

// The directory `option` names, made when missing: a path that is not empty and not a file.
CLI::Validator output_directory();

// Opens `path` (named by `option`) for writing; throws spindle::Error with the system's reason.
std::ofstream open_output(const std::string& path, const std::string& option);

// Closes what open_output opened; throws spindle::Error with the system's reason when any write
// failed (a full disk).
void close_output(std::ofstream& out, const std::string& path, const std::string& option);

// Pretty-printed, to stdout.
void print_json(const nlohmann::json& j);

}  // namespace spindle::cli

// The tuning knobs (`--tune KEY=VALUE`): every setting of the graph's tiling and of the
// executors' kernels that experiments measured, declared once in one table that `spindle tune
// --list` prints, so that the commands' main help lists only what a user needs.
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json_fwd.hpp>

#include "host/executor.h"
#include "host/graph_builder.h"

namespace spindle::cli {

// What a knob sets: the graph (how the builder tiles it) or the executor that runs it.
enum class KnobTarget { Tiling, Executor };

struct Knob {
  const char* name;
  KnobTarget target;
  const char* values;   // the values it takes, as `--tune` reads them
  const char* fallback;  // its default, as a value
  const char* what;     // what it does
  bool changes_bits;    // whether it changes the numerics, hence the tokens' bits
  const char* measured;  // what it was measured to do, with the docs/EXPERIMENTS.md row's session
  // Sets it; throws KnobValueError for a value outside `values`.
  void (*apply)(const std::string& value, BuildOptions& build, ExecutorOptions& exec);
};

struct KnobValueError {
  std::string why;
};

// Every knob, once.
const std::vector<Knob>& knobs();

// The `--tune` settings of one command line, as given.
struct TuneSettings {
  std::vector<std::string> given;  // KEY=VALUE, in order; a later one overrides an earlier
  // Whether `key` was set.
  bool has(const std::string& key) const;
};

// --tune KEY=VALUE (repeatable), its help naming `spindle tune --list`; `tiling` and `executor`
// say which knobs the command takes.
CLI::Option* add_tune_option(CLI::App& cmd, TuneSettings& settings, bool tiling, bool executor);

// Applies the settings in order. Throws spindle::Error naming the setting for one that is not
// KEY=VALUE, an unknown key (listing the keys), a value outside the knob's values (naming them),
// an executor knob where `exec` is null and a tiling knob where `build` is null (`why_no_tiling`
// saying why the command takes none, e.g. "the graph is read from --graph").
void apply_tune(const TuneSettings& settings, BuildOptions* build, ExecutorOptions* exec,
                const std::string& why_no_tiling = "this command builds no graph");

// The table, for `tune --list --json`.
nlohmann::json knobs_json();

// `spindle tune --list [--json]`.
void add_tune_command(CLI::App& app);

}  // namespace spindle::cli

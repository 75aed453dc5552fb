// spindle graph dump | save: a decode graph as JSON, or saved as a .sptg file.
#include <filesystem>
#include <iostream>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "host/cli/commands.h"
#include "host/cli/options.h"
#include "host/cli/session.h"
#include "tasks/graph_file.h"

namespace spindle::cli {
namespace {

struct GraphFlags {
  std::string model;
  GraphSource graph;  // save: built for the model; dump: that, or a saved graph
  TuneSettings tune;  // the tiling knobs of a graph built
  DeviceSplit split;
  std::string out;
  bool json = false;  // save: print what was written as JSON
};

Graph build_graph(const GraphFlags& f) {
  BuildOptions build;
  apply_tune(f.tune, &build, nullptr);
  build.context = f.graph.context;
  f.split.apply_to(build);
  return std::move(open_session(f.model, build)->graph);
}

void dump(const GraphFlags& f) {
  const Graph g = f.graph.file.empty() ? build_graph(f) : load_graph(f.graph.file);
  const std::string text = graph_to_json(g).dump(2) + "\n";
  if (f.out.empty()) {
    std::cout << text;
    return;
  }
  std::ofstream out = open_output(f.out, "--out");
  out << text;
  close_output(out, f.out, "--out");
  std::cerr << "spindle: wrote " << f.out << "\n";
}

void save(const GraphFlags& f) {
  const Graph g = build_graph(f);
  save_graph(f.out, g);
  std::cerr << "spindle: wrote " << f.out << "\n";
  if (!f.json) return;
  print_json({{"path", f.out},
              {"model", f.model},
              {"tasks", g.tasks.size()},
              {"counters", g.num_counters()},
              {"context", g.params.context},
              {"devices", g.devices},
              {"bytes", std::filesystem::file_size(f.out)}});
}

// Returns the options that build the graph (all but --model).
std::vector<CLI::Option*> add_build_options(CLI::App& cmd, GraphFlags& f) {
  add_model_option(cmd, f.model);
  CLI::Option* context = add_context_option(cmd, f.graph.context, "the model's max_position_embeddings");
  std::vector<CLI::Option*> options = {context, add_tune_option(cmd, f.tune, true, false)};
  for (CLI::Option* o : add_device_split_options(cmd, f.split)) options.push_back(o);
  return options;
}

}  // namespace

void add_graph_commands(CLI::App& app) {
  CLI::App* graph = app.add_subcommand("graph", "Inspect or save a model's decode graph");
  graph->require_subcommand(1);

  auto d = std::make_shared<GraphFlags>();
  CLI::App* dump_cmd = graph->add_subcommand(
      "dump", "Print a graph as JSON: params, arenas, counters, views and tasks");
  add_graph_file_option(*dump_cmd, d->graph.file, "dump this saved .sptg file instead of building one",
                        add_build_options(*dump_cmd, *d))
      ->excludes("--model");
  dump_cmd->add_option("--out,-o", d->out, "write the JSON here instead of stdout")->check(output_file());
  dump_cmd->callback([d] { dump(*d); });

  auto s = std::make_shared<GraphFlags>();
  CLI::App* save_cmd = graph->add_subcommand("save", "Build a model's graph and save it (.sptg)");
  add_build_options(*save_cmd, *s);
  save_cmd->add_option("--out,-o", s->out, "the .sptg file to write")->required()->check(output_file());
  save_cmd->add_flag("--json", s->json, "print {path, model, tasks, counters, context, bytes} of the file written");
  save_cmd->callback([s] { save(*s); });
}

}  // namespace spindle::cli

// spindle graph dump | save: a decode graph as JSON, or saved as a .sptg file.
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "host/cli/commands.h"
#include "host/cli/options.h"
#include "host/cli/session.h"
#include "tasks/graph_file.h"

namespace spindle::cli {
namespace {

struct GraphFlags {
  std::string model;
  std::string graph_file;  // dump: a saved graph instead of a model
  uint32_t context = 0;
  BuildOptions build;      // the tiling options; the context is set from --context
  std::string out;
};

Graph build_graph(const GraphFlags& f) {
  BuildOptions build = f.build;
  build.context = f.context;
  return std::move(open_session(f.model, build)->graph);
}

void dump(const GraphFlags& f) {
  const Graph g = f.graph_file.empty() ? build_graph(f) : load_graph(f.graph_file);
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
  save_graph(f.out, build_graph(f));
  std::cerr << "spindle: wrote " << f.out << "\n";
}

void add_build_options(CLI::App& cmd, GraphFlags& f) {
  add_model_option(cmd, f.model);
  add_context_option(cmd, f.context, "the model's max_position_embeddings");
  add_tiling_options(cmd, f.build);
}

}  // namespace

void add_graph_commands(CLI::App& app) {
  CLI::App* graph = app.add_subcommand("graph", "Inspect or save a model's decode graph");
  graph->require_subcommand(1);

  auto d = std::make_shared<GraphFlags>();
  CLI::App* dump_cmd = graph->add_subcommand(
      "dump", "Print a graph as JSON: params, arenas, counters, views and tasks");
  add_build_options(*dump_cmd, *d);
  dump_cmd->add_option("--graph,-g", d->graph_file,
                       "dump this saved .sptg file instead of building one")
      ->check(input_file())
      ->excludes("--model")
      ->excludes("--context")
      ->excludes("--stage-tasks")
      ->excludes("--rows-per-tile")
      ->excludes("--attn-chunks")
      ->excludes("--attn-q-splits")
      ->excludes("--o-proj-split")
      ->excludes("--down-split")
      ->excludes("--fused-mlp")
      ->excludes("--kv-head-waits");
  dump_cmd->add_option("--out,-o", d->out, "write the JSON here instead of stdout")->check(output_file());
  dump_cmd->callback([d] { dump(*d); });

  auto s = std::make_shared<GraphFlags>();
  CLI::App* save_cmd = graph->add_subcommand("save", "Build a model's graph and save it (.sptg)");
  add_build_options(*save_cmd, *s);
  save_cmd->add_option("--out,-o", s->out, "the .sptg file to write")->required()->check(output_file());
  save_cmd->callback([s] { save(*s); });
}

}  // namespace spindle::cli

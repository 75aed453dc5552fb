// spindle info: a model's shape, what one decode step of its graph reads, and the Vulkan
// devices this machine offers the vulkan executor.
#include <cstdio>
#include <iterator>
#include <memory>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "host/cli/commands.h"
#include "host/cli/graph_stats.h"
#include "host/cli/options.h"
#include "host/cli/session.h"
#include "host/vulkan_devices.h"
#include "tasks/error.h"
#include "tasks/weight_shard.h"

namespace spindle::cli {
namespace {

struct InfoFlags {
  std::string model;
  uint32_t context = 0;
  TuneSettings tune;  // the tiling knobs (the graph's task count)
  DeviceSplit split;
  bool json = false;
};

// Each stored tensor once: a tied lm_head is the embedding under a second name.
uint64_t parameter_count(const ModelWeights& w) {
  std::set<std::pair<uint32_t, uint64_t>> seen;
  uint64_t n = 0;
  for (const auto& [name, t] : w.tensors)
    if (seen.emplace(t.arena, t.offset).second) n += t.elements();
  return n;
}

// si(1192099840, "B") → "1.19 GB"; si(512, "") → "512"
std::string si(uint64_t n, const char* unit) {
  static const char* const kPrefix[] = {"", "k", "M", "G", "T", "P"};
  double v = double(n);
  size_t i = 0;
  for (; v >= 1000 && i + 1 < std::size(kPrefix); ++i) v /= 1000;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g %s%s", v, kPrefix[i], unit);
  std::string out = buf;
  if (out.back() == ' ') out.pop_back();
  return out;
}

// The Vulkan devices as JSON objects; `why` says why there are none when listing fails.
nlohmann::json vulkan_devices(std::string& why) {
  nlohmann::json list = nlohmann::json::array();
  try {
    for (const VulkanDeviceInfo& d : list_vulkan_devices())
      list.push_back({{"index", d.index}, {"name", d.name}, {"type", d.type}, {"driver", d.driver},
                      {"api", d.api}, {"usable", d.unusable.empty()}, {"unusable_because", d.unusable}});
    if (list.empty()) why = "the Vulkan loader found no device";
  } catch (const Error& e) {
    why = e.what();
  }
  return list;
}

void info(const InfoFlags& f) {
  BuildOptions build;
  apply_tune(f.tune, &build, nullptr);
  build.context = f.context;
  f.split.apply_to(build);
  const auto s = open_session(f.model, build);
  const ModelConfig& c = s->weights.config;
  const Graph& g = s->graph;
  const uint64_t params = parameter_count(s->weights), weight_bytes = s->weights.total_bytes();
  const uint64_t per_token = weight_bytes_per_token(g), kv = kv_bytes_per_position(g);
  const uint64_t recurrent = recurrent_state_bytes(g);
  const std::vector<uint64_t> by_device = device_bytes(g, 1);
  std::vector<uint64_t> held;  // each device's weight shard (tasks/weight_shard.h)
  for (uint32_t d = 0; d < g.devices; ++d) held.push_back(device_weight_shard(g, d).bytes());
  std::string no_vulkan;
  const nlohmann::json devices = vulkan_devices(no_vulkan);
  if (f.json) {
    print_json({{"model", s->weights.source},
                {"family", family_name(c.family)},
                {"layers", c.n_layers},
                {"hidden", c.hidden},
                {"heads", c.n_heads},
                {"kv_heads", c.n_kv_heads},
                {"head_dim", c.head_dim},
                {"intermediate", c.intermediate},
                {"vocab", c.vocab},
                {"parameters", params},
                {"weight_bytes", weight_bytes},
                {"bytes_read_per_token", per_token},
                {"kv_bytes_per_position", kv},
                {"recurrent_state_bytes", recurrent},
                {"devices", g.devices},
                {"device_bytes_at_position_1", by_device},
                {"device_weight_bytes_held", held},
                {"context", g.params.context},
                {"tasks", g.tasks.size()},
                {"counters", g.num_counters()},
                {"views", g.views.size()},
                {"vulkan_devices", devices},
                {"vulkan_note", no_vulkan}});
    return;
  }
  std::printf("model                  %s\n", s->weights.source.c_str());
  std::printf("family                 %s\n", family_name(c.family));
  std::printf("layers                 %u\n", c.n_layers);
  std::printf("hidden                 %u\n", c.hidden);
  std::printf("heads                  %u q, %u kv, head dim %u\n", c.n_heads, c.n_kv_heads,
              c.head_dim);
  std::printf("intermediate           %u\n", c.intermediate);
  std::printf("vocab                  %u\n", c.vocab);
  std::printf("parameters             %llu (%s)\n", (unsigned long long)params,
              si(params, "").c_str());
  std::printf("weight bytes           %llu (%s)\n", (unsigned long long)weight_bytes,
              si(weight_bytes, "B").c_str());
  std::printf("bytes read per token   %llu (%s)\n", (unsigned long long)per_token,
              si(per_token, "B").c_str());
  std::printf("KV bytes per position  %llu\n", (unsigned long long)kv);
  if (recurrent)
    std::printf("recurrent state        %llu (%s), read and written every token\n", (unsigned long long)recurrent,
                si(recurrent, "B").c_str());
  for (uint32_t d = 0; d < g.devices && g.devices > 1; ++d)
    std::printf("device %-15u %llu (%s) moved by its tasks at position 1, %s of weights held\n", d,
                (unsigned long long)by_device[d], si(by_device[d], "B").c_str(), si(held[d], "B").c_str());
  if (f.split.expert_parallel)
    std::printf("expert parallel        a device's routed experts counted at their share of an even routing\n");
  std::printf("graph                  %zu tasks, %u counters, %zu views, context %u\n",
              g.tasks.size(), g.num_counters(), g.views.size(), g.params.context);
  if (devices.empty()) std::printf("vulkan devices         none: %s\n", no_vulkan.c_str());
  for (const auto& d : devices)
    std::printf("vulkan device %-8u %s (%s, %s, Vulkan %s)%s\n", d["index"].get<uint32_t>(),
                d["name"].get<std::string>().c_str(), d["type"].get<std::string>().c_str(),
                d["driver"].get<std::string>().c_str(), d["api"].get<std::string>().c_str(),
                d["usable"].get<bool>() ? "" : (": unusable, " + d["unusable_because"].get<std::string>()).c_str());
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto f = std::make_shared<InfoFlags>();
  CLI::App* cmd = app.add_subcommand(
      "info", "A model's shape, size, and the bytes one decode step reads, from its graph");
  add_model_option(*cmd, f->model);
  add_context_option(*cmd, f->context, "the model's max_position_embeddings");
  add_tune_option(*cmd, f->tune, true, false);
  add_device_split_options(*cmd, f->split);
  cmd->add_flag("--json", f->json, "print as JSON");
  cmd->callback([f] { info(*f); });
}

}  // namespace spindle::cli

#include "host/cli/tuning.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "host/cli/options.h"
#include "tasks/error.h"

namespace spindle::cli {
namespace {

// A whole number in decimal within [lo, hi].
uint32_t whole(const std::string& value, uint32_t lo, uint32_t hi) {
  uint32_t v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size() || v < lo || v > hi)
    throw KnobValueError{"'" + value + "' is not a whole number from " + std::to_string(lo) + " to " +
                         std::to_string(hi)};
  return v;
}

bool on_off(const std::string& value) {
  if (value == "on") return true;
  if (value == "off") return false;
  throw KnobValueError{"'" + value + "' is not on or off"};
}

// "PIECES" or "PIECES/GROUP", each a decimal number up to 65535; GROUP is 0 when omitted.
GemvSplit split(const std::string& value) {
  const size_t slash = value.find('/');
  auto number = [&](const std::string& part) {
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos)
      throw KnobValueError{"'" + value + "' is not PIECES or PIECES/GROUP"};
    const unsigned long v = part.size() > 5 ? 0x10000ul : std::stoul(part);  // more digits: past 65535 and past stoul
    if (v > 0xFFFFu) throw KnobValueError{"'" + value + "': " + part + " is more than 65535"};
    return uint32_t(v);
  };
  return {number(value.substr(0, slash)), slash == std::string::npos ? 0u : number(value.substr(slash + 1))};
}

uint32_t kib(const std::string& value) { return whole(value, 0, 227) << 10; }

const char* const kKib = "0 to 227 (KiB of a block's shared memory)";
const char* const kSplit = "PIECES[/GROUP], each up to 65535";

}  // namespace

const std::vector<Knob>& knobs() {
  using T = KnobTarget;
  static const std::vector<Knob> table = {
      {"rows-per-tile", T::Tiling, "0 to 4294967295", "0",
       "output rows of each GEMV / GATE_UP task; 0 = chosen from stage-tasks", false,
       "not measured on its own: stage-tasks chooses it",
       [](const std::string& v, BuildOptions& b, ExecutorOptions&) { b.rows_per_tile = whole(v, 0, UINT32_MAX); }},
      {"stage-tasks", T::Tiling, "1 to 1048576", "132",
       "about how many tasks each GEMV / GATE_UP stage is split into (rows a task: a multiple of 8)", false,
       "132 (a task a worker a stage): qwen3-8b 6.958 -> 5.797 ms, qwen3-0.6b 1.704 -> 1.306 (EXPERIMENTS 3rd "
       "§2); 264 and 396 slower on both hybrid presets (61st §6)",
       [](const std::string& v, BuildOptions& b, ExecutorOptions&) { b.stage_tasks = whole(v, 1, 1u << 20); }},
      {"attn-chunks", T::Tiling, "0 to 4294967295", "0",
       "tasks each kv head's attention is split into (position ranges whose partials merge in order); 0 = about "
       "256 positions each, at most 128 tasks in all",
       true, "8 is the cluster program's (EXPERIMENTS 36th §1); not measured on its own",
       [](const std::string& v, BuildOptions& b, ExecutorOptions&) { b.attn_chunks = whole(v, 0, UINT32_MAX); }},
      {"attn-q-splits", T::Tiling, "0 to 4294967295 (dividing the q heads a kv head)", "0",
       "parts each kv head's q heads are split into, an attention task each; 0 = the most that keep one-chunk "
       "attention within 128 tasks, else 1",
       false, "not in docs/EXPERIMENTS.md",
       [](const std::string& v, BuildOptions& b, ExecutorOptions&) { b.attn_q_splits = whole(v, 0, UINT32_MAX); }},
      {"gdn-gang", T::Tiling, "0 to 4294967295 (dividing the GDN value head size)", "0",
       "members of each GDN value head's gang, sharing its state rows, run at once by the CUDA megakernel; 0 = "
       "the most that leave 16 rows a member within 128 GDN tasks",
       false,
       "gangs against a head a task: qwen3.5-0.8b 1.2901 -> 1.2037 ms, qwen3.5-35b-a3b 4.6810 -> 4.5809 "
       "(EXPERIMENTS 59th §5); widths 1 / 2 / the default on 35b 4.2415 / 4.0942 / 4.0349 (61st §4)",
       [](const std::string& v, BuildOptions& b, ExecutorOptions&) { b.gdn_gang = whole(v, 0, UINT32_MAX); }},
      {"o-proj-split", T::Tiling, kSplit, "0",
       "o_proj's row dots as sums of PIECES dots over equal column ranges, GROUP at a time "
       "(docs/two-hop-layer.md); 0 = the plain dot",
       true,
       "8 with kv-head-waits: qwen3-0.6b @1 0.9443 -> 0.9294 ms, @4096 1.5409 -> 1.5657 (EXPERIMENTS 27th §2); "
       "part of the cluster program's graph",
       [](const std::string& v, BuildOptions& b, ExecutorOptions&) { b.o_proj_split = split(v); }},
      {"down-split", T::Tiling, kSplit, "0", "down's row dots summed as o-proj-split's are; 0 = the plain dot", true,
       "its bits are fused-mlp's of the same PIECES/GROUP (EXPERIMENTS 24th §1)",
       [](const std::string& v, BuildOptions& b, ExecutorOptions&) { b.down_split = split(v); }},
      {"gdn-out-split", T::Tiling, kSplit, "0",
       "the GDN out_proj's row dots summed as o-proj-split's are; 0 = the plain dot", true,
       "the numerics of --devices PIECES (PIECES/PIECES); not measured for speed",
       [](const std::string& v, BuildOptions& b, ExecutorOptions&) { b.gdn_out_split = split(v); }},
      {"expert-down-split", T::Tiling, kSplit, "0",
       "the routed experts' down dots, and the shared expert's, summed as o-proj-split's are, from pieces as tasks "
       "of their own (every executor but cuda's megakernel runs them); 0 = the plain dots", true,
       "the numerics of --devices PIECES (PIECES/PIECES); not measured for speed",
       [](const std::string& v, BuildOptions& b, ExecutorOptions&) { b.expert_down_split = split(v); }},
      {"shared-down-split", T::Tiling, kSplit, "0",
       "the shared expert's down dots summed from pieces split otherwise than expert-down-split's (alone, with the "
       "routed experts' dots whole); 1 = the plain dots, 0 = as expert-down-split", true,
       "the numerics of --devices PIECES --expert-parallel (PIECES/PIECES); not measured for speed",
       [](const std::string& v, BuildOptions& b, ExecutorOptions&) { b.shared_down_split = split(v); }},
      {"fused-mlp", T::Tiling, "PIECES[/GANG], GANG at most 255", "0",
       "each layer's MLP as one stage of PIECES tasks in gangs of GANG, down summed as down-split PIECES/GANG "
       "(refused with down-split); 0 = the gate_up and down stages",
       true,
       "96/8 is the cluster program's graph (see cuda-cluster); 48/8 slower: 0.7251 against 0.6133 ms @1 "
       "(EXPERIMENTS 48th §5b)",
       [](const std::string& v, BuildOptions& b, ExecutorOptions&) { b.fused_mlp = split(v); }},
      {"kv-head-waits", T::Tiling, "on or off", "off",
       "q, k and v as one stage a kv head, its attention waiting for its rows alone; with o-proj-split KV_HEADS "
       "also o_proj as pieces a kv head (the fp64 executor's bits excepted: docs/numerics.md)",
       false,
       "qwen3-0.6b @1 / @4096 0.8187 / 1.2863 -> 0.8144 / 1.2785 ms; qwen3-8b 4.4345 -> 4.4748 (EXPERIMENTS "
       "27th §1)",
       [](const std::string& v, BuildOptions& b, ExecutorOptions&) { b.kv_head_waits = on_off(v); }},
      {"shard-weights", T::Executor, "on or off", "off",
       "cpu executors: each device its own copy of its shard of the weights (what its tasks may read), every "
       "other byte NaN, as a device of several would hold them: the bits of a run change where a device reads "
       "outside its shard (docs/multi-device.md)",
       false, "a check of the partition, not measured for speed",
       [](const std::string& v, BuildOptions&, ExecutorOptions& e) { e.shard_weights = on_off(v); }},
      {"cuda-cluster", T::Executor, "on or off", "off",
       "cuda megakernel: run the graph as the cluster program (docs/two-hop-layer.md), which needs a graph built "
       "with kv-head-waits=on o-proj-split=KV_HEADS attn-chunks=8 fused-mlp=PIECES/8 and greedy sampling",
       false,
       "qwen3-0.6b: 0.5942 / 0.8721 / 1.4967 ms at positions 1 / 1024 / 4096 against the plain megakernel's "
       "0.8054 / 0.9499 / 1.3000 (JOURNAL 52nd §4): faster to 1024, 15% slower at 4096",
       [](const std::string& v, BuildOptions&, ExecutorOptions& e) { e.megakernel.cluster_program = on_off(v); }},
      {"cuda-blocks-per-sm", T::Executor, "1 or 2", "1",
       "cuda megakernel: persistent blocks an SM holds (2: the kernel built for at most 128 registers a thread)",
       false, "2: qwen3-0.6b @1 0.9468 -> 1.4044 ms, qwen3-8b 4.5435 -> 6.7599 (EXPERIMENTS 12th §1, rejected)",
       [](const std::string& v, BuildOptions&, ExecutorOptions& e) { e.megakernel.blocks_per_sm = whole(v, 1, 2); }},
      {"cuda-preload-kb", T::Executor, kKib, "192",
       "cuda megakernel: a projection task whose weights take at most this many KiB copies them into shared "
       "memory before its wait; 0 = never",
       false,
       "192 holds qwen3-0.6b's GATE_UP and qwen3-30b-a3b's q/k/v tasks, whose copies make them faster; no "
       "qwen3-8b projection task is that small (host/executor.h)",
       [](const std::string& v, BuildOptions&, ExecutorOptions& e) { e.megakernel.weight_preload_bytes = kib(v); }},
      {"cuda-attn-kv-kb", T::Executor, kKib, "0",
       "cuda, every mode: KiB an attention task stages K and V rows in; 0 = 160 (the cluster program: 64)", false,
       "160 (from 64): qwen3-0.6b @4096 1.5533 -> 1.4733 ms (EXPERIMENTS 8th §3)",
       [](const std::string& v, BuildOptions&, ExecutorOptions& e) { e.megakernel.attn_kv_bytes = kib(v); }},
      {"cuda-attn-score-kb", T::Executor, kKib, "0",
       "cuda, every mode: KiB for an attention task's scores; 0 = 32 (the cluster program: 16)", false,
       "32: qwen3-8b @16384 11.2229 -> 8.6220 ms (EXPERIMENTS 8th §5)",
       [](const std::string& v, BuildOptions&, ExecutorOptions& e) { e.megakernel.attn_score_bytes = kib(v); }},
      {"cuda-l2-prefetch-distance", T::Executor, "0 to 4294967295", "1",
       "cuda megakernel: each task prefetches into L2 its share of the weights of the stage this many stages "
       "later; 0 = none",
       false, "more slows the tasks, which wait behind the prefetches (host/executor.h)",
       [](const std::string& v, BuildOptions&, ExecutorOptions& e) {
         e.megakernel.l2_prefetch_distance = whole(v, 0, UINT32_MAX);
       }},
      {"cuda-l2-prefetch-mb", T::Executor, "auto or 0 to 1024", "auto",
       "cuda megakernel: MiB of a stage's weights prefetched; auto = 2 per 1024 of the hidden size", false,
       "auto's 2 MiB 0.7% faster than 4 on qwen3-0.6b @1, its 8 MiB 0.7% faster than 4 on qwen3-8b "
       "(host/executor.h)",
       [](const std::string& v, BuildOptions&, ExecutorOptions& e) {
         e.megakernel.l2_prefetch_bytes = v == "auto" ? kL2PrefetchAuto : uint64_t(whole(v, 0, 1024)) << 20;
       }},
      {"steps-per-launch", T::Executor, "0 to 4294967295", "0",
       "cuda megakernel: decode steps one launch runs; 0 = every step asked for at once", false,
       "1: qwen3-0.6b @1 / @4096 0.8163 / 1.3156 -> 0.8277 / 1.3381 ms; 8: 0.8173 / 1.3154 (EXPERIMENTS 28th §10)",
       [](const std::string& v, BuildOptions&, ExecutorOptions& e) { e.steps_per_launch = whole(v, 0, UINT32_MAX); }},
      {"vk-warps", T::Executor, "0 to 32 (the device's workgroup limit / 32)", "0",
       "vulkan: logical warps of 32 invocations a workgroup; 0 = 1 on lavapipe, else 8", false,
       "docs/vulkan.md, Knobs",
       [](const std::string& v, BuildOptions&, ExecutorOptions& e) { e.vulkan.warps = whole(v, 0, 32); }},
      {"vk-dot-unroll", T::Executor, "0, 1, 2, 4 or 8", "0",
       "vulkan: 256-element blocks of each weight row a warp loads a loop trip; 0 = the deepest that fits the "
       "smallest projection input",
       false, "docs/vulkan.md, Knobs",
       [](const std::string& v, BuildOptions&, ExecutorOptions& e) { e.vulkan.dot_unroll = whole(v, 0, 8); }},
      {"vk-attn-unroll", T::Executor, "0, 1, 2, 4 or 8", "0",
       "vulkan: cache positions whose K and V rows an attention warp loads together; 0 = 1 on lavapipe, else 4",
       false, "docs/vulkan.md, Knobs",
       [](const std::string& v, BuildOptions&, ExecutorOptions& e) { e.vulkan.attn_unroll = whole(v, 0, 8); }},
  };
  return table;
}

bool TuneSettings::has(const std::string& key) const {
  return std::any_of(given.begin(), given.end(),
                     [&](const std::string& s) { return s.substr(0, s.find('=')) == key; });
}

CLI::Option* add_tune_option(CLI::App& cmd, TuneSettings& settings, bool tiling, bool executor) {
  const std::string which = tiling && executor ? "a tiling or executor knob" : tiling ? "a tiling knob" : "an executor knob";
  return cmd.add_option("--tune", settings.given,
                        "set " + which +
                            ", repeatable; `spindle tune --list` lists the knobs, their values and what each was "
                            "measured to do; those marked 'changes the bits' change the tokens")
      ->type_name("KEY=VALUE")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

void apply_tune(const TuneSettings& settings, BuildOptions* build, ExecutorOptions* exec,
                const std::string& why_no_tiling) {
  BuildOptions unused_build;
  ExecutorOptions unused_exec;
  for (const std::string& s : settings.given) {
    const size_t eq = s.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error("--tune '" + s + "': not KEY=VALUE (spindle tune --list lists the keys)");
    const std::string key = s.substr(0, eq), value = s.substr(eq + 1);
    const auto& table = knobs();
    const auto k = std::find_if(table.begin(), table.end(), [&](const Knob& n) { return key == n.name; });
    if (k == table.end()) {
      std::string keys;
      for (const Knob& n : table) keys += std::string(keys.empty() ? "" : ", ") + n.name;
      throw Error("--tune " + s + ": no knob '" + key + "'; the knobs are " + keys);
    }
    if (k->target == KnobTarget::Tiling && !build)
      throw Error("--tune " + s + ": a tiling knob, and " + why_no_tiling);
    if (k->target == KnobTarget::Executor && !exec)
      throw Error("--tune " + s + ": an executor knob, and this command runs no executor");
    try {
      k->apply(value, build ? *build : unused_build, exec ? *exec : unused_exec);
    } catch (const KnobValueError& e) {
      throw Error("--tune " + s + ": " + e.why + "; " + key + " takes " + k->values);
    }
  }
}

nlohmann::json knobs_json() {
  nlohmann::json list = nlohmann::json::array();
  for (const Knob& k : knobs())
    list.push_back({{"name", k.name},
                    {"sets", k.target == KnobTarget::Tiling ? "tiling" : "executor"},
                    {"values", k.values},
                    {"default", k.fallback},
                    {"what", k.what},
                    {"changes_bits", k.changes_bits},
                    {"measured", k.measured}});
  return list;
}

void add_tune_command(CLI::App& app) {
  struct TuneFlags {
    bool list = false, json = false;
  };
  auto f = std::make_shared<TuneFlags>();
  CLI::App* cmd = app.add_subcommand("tune", "The tuning knobs that --tune KEY=VALUE sets");
  cmd->add_flag("--list", f->list, "list every knob: its values, default, what it does, whether it changes the tokens' "
                          "bits and what it was measured to do")
      ->required();
  cmd->add_flag("--json", f->json, "print the list as JSON");
  cmd->callback([f] {
    if (f->json) {
      print_json(knobs_json());
      return;
    }
    for (const Knob& k : knobs()) {
      std::printf("%s=%s (default %s; %s)%s\n", k.name, k.values, k.fallback,
                  k.target == KnobTarget::Tiling ? "tiling" : "executor",
                  k.changes_bits ? " CHANGES THE BITS" : "");
      std::printf("    %s\n    measured: %s\n", k.what, k.measured);
    }
  });
}

}  // namespace spindle::cli

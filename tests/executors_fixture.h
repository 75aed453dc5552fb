// The tiny synthetic model and its graph, built once per test program, and the decode-and-
// compare helpers that every executor's equivalence tests share.
#pragma once
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "host/decode.h"
#include "host/gates.h"
#include "tasks/error.h"
#include "host/graph_builder.h"
#include "host/model_weights.h"

// The tiny presets of the hybrid families (GDN, gated attention and, in the MoE ones, the
// shared expert).
inline constexpr const char* kHybridPresets[] = {"synthetic:tiny-qwen3.5", "synthetic:tiny-qwen3.5-moe",
                                                 "synthetic:tiny-qwen3-next"};

struct TinyModel {
  spindle::ModelWeights weights;
  spindle::Graph graph;
};

// tiny's graph at context 64 with 3 attention chunks, o_proj's and down's dots split as given,
// the MLP fused into gangs as given, and the stages a kv head as kv_head_waits says.
inline TinyModel build_tiny(spindle::GemvSplit o_proj_split, spindle::GemvSplit down_split,
                            spindle::GemvSplit fused_mlp = {}, bool kv_head_waits = false) {
  TinyModel t{spindle::load_model("synthetic:tiny"), {}};
  spindle::BuildOptions o;
  o.context = 64;
  o.attn_chunks = 3;
  o.o_proj_split = o_proj_split;
  o.down_split = down_split;
  o.fused_mlp = fused_mlp;
  o.kv_head_waits = kv_head_waits;
  t.graph = spindle::build_decode_graph(t.weights, o);
  return t;
}

inline const TinyModel& tiny_model() {
  static const TinyModel m = build_tiny({}, {});
  return m;
}

// tiny with o_proj's dots summed over its 2 kv heads' columns and down's over 16 pieces of one
// octet in groups of 4 (GEMV operand 7, the two-hop layer's numerics).
inline const TinyModel& tiny_split_model() {
  static const TinyModel m = build_tiny({2, 0}, {16, 4});
  return m;
}

// tiny with its q, k and v rows a stage a kv head (kv_head_waits): the plain graph's bits.
inline const TinyModel& tiny_head_waits_model() {
  static const TinyModel m = build_tiny({}, {}, {}, true);
  return m;
}

// tiny at context 64 with `chunks` attention chunks and each kv head's 2 q heads split over 2
// attention tiles: a schedule, so the plain graph's bits.
inline TinyModel tiny_q_split_model(uint32_t chunks) {
  TinyModel t{spindle::load_model("synthetic:tiny"), {}};
  spindle::BuildOptions o;
  o.context = 64;
  o.attn_chunks = chunks;
  o.attn_q_splits = 2;
  t.graph = spindle::build_decode_graph(t.weights, o);
  return t;
}

// tiny_split_model's numerics with o_proj as pieces a kv head (kv_head_waits).
inline const TinyModel& tiny_head_pieces_model() {
  static const TinyModel m = build_tiny({2, 0}, {16, 4}, {}, true);
  return m;
}

// tiny_split_model's numerics with the MLP as gang tasks: 16 pieces in 4 gangs of 4.
inline const TinyModel& tiny_fused_mlp_model() {
  static const TinyModel m = build_tiny({2, 0}, {}, {16, 4});
  return m;
}

// How a qwen3-0.6b test graph sums o_proj and down: plainly; split as the two-hop layer sums
// them (o_proj over its 8 kv heads; down over 128 pieces of 24 columns, in gangs of 16); that
// split with the MLP as gang tasks; or that with kv_head_waits, o_proj as pieces a kv head, each
// waiting for its kv head's attention alone (the same bits as the split).
enum class TwoHop { Plain, Split, FusedMlp, HeadPieces, Cluster };

// The build options of qwen3-0.6b's graph at `context` with 8 attention chunks, summed as
// `two_hop` says; Cluster: as the cluster program takes it (megakernel/cluster_program.h: o_proj
// pieces a kv head, the MLP in 96 pieces in gangs of 8).
inline spindle::BuildOptions qwen06b_build(TwoHop two_hop, uint32_t context = 128) {
  spindle::BuildOptions o;
  o.context = context;
  o.attn_chunks = 8;
  if (two_hop != TwoHop::Plain) o.o_proj_split = {8, 0};
  if (two_hop == TwoHop::Split) o.down_split = {128, 16};
  if (two_hop == TwoHop::FusedMlp || two_hop == TwoHop::HeadPieces) o.fused_mlp = {128, 16};
  if (two_hop == TwoHop::Cluster) o.fused_mlp = {96, 8};
  o.kv_head_waits = two_hop == TwoHop::HeadPieces || two_hop == TwoHop::Cluster;
  return o;
}

// That graph. tiny's split changes no bf16 output (its few dots rarely sit at a rounding
// boundary); this one's does (executors_determinism.cpp), so a GPU executor that ignored the
// split would fail against it.
inline spindle::Graph qwen06b_graph(const spindle::ModelWeights& w, TwoHop two_hop, uint32_t context = 128) {
  return spindle::build_decode_graph(w, qwen06b_build(two_hop, context));
}

// synthetic:qwen3-0.6b, loaded once per test program.
inline const spindle::ModelWeights& qwen06b_weights() {
  static const spindle::ModelWeights w = spindle::load_model("synthetic:qwen3-0.6b");
  return w;
}

// A decode's tokens and its last step's logits.
struct Decoded {
  std::vector<uint32_t> tokens;
  std::vector<float> logits;
};

inline Decoded run_decode(spindle::Executor& ex, const spindle::Graph& g, const std::vector<uint32_t>& prompt,
                          uint32_t new_tokens) {
  Decoded d{spindle::decode(ex, g, prompt, new_tokens, {}).tokens, {}};
  d.logits.assign(ex.logits().begin(), ex.logits().end());
  return d;
}

inline Decoded run_decode(const spindle::Graph& g, const spindle::ModelWeights& w, const spindle::ExecutorOptions& opt,
                          const std::vector<uint32_t>& prompt, uint32_t new_tokens) {
  return run_decode(*spindle::make_executor(g, w, opt), g, prompt, new_tokens);
}

// Bit for bit: the same tokens and the same logits' bytes.
inline void check_same(const Decoded& got, const Decoded& expect) {
  CHECK(got.tokens == expect.tokens);
  REQUIRE(got.logits.size() == expect.logits.size());
  CHECK(std::memcmp(got.logits.data(), expect.logits.data(), expect.logits.size() * sizeof(float)) == 0);
}

// The threaded executor, on both schedules and 1, 3 and 8 workers, decodes `g` from `prompt` with
// `expect`'s tokens and logits, bit for bit.
inline void check_threaded_gives(const Decoded& expect, const spindle::Graph& g, const spindle::ModelWeights& w,
                                 const std::vector<uint32_t>& prompt, uint32_t new_tokens) {
  for (spindle::ScheduleKind sched : {spindle::ScheduleKind::Ticket, spindle::ScheduleKind::Static})
    for (uint32_t workers : {1u, 3u, 8u}) {
      CAPTURE(spindle::schedule_kind_name(sched));
      CAPTURE(workers);
      check_same(run_decode(g, w, {spindle::ExecutorKind::Threaded, workers, sched}, prompt, new_tokens), expect);
    }
}

// Bit for bit, position by position: teacher-forced logits of two executors.
inline void check_same_rows(const spindle::LogitRows& got, const spindle::LogitRows& expect) {
  REQUIRE(got.size() == expect.size());
  for (size_t t = 0; t < got.size(); ++t) {
    CAPTURE(t);
    REQUIRE(got[t].size() == expect[t].size());
    CHECK(std::memcmp(got[t].data(), expect[t].data(), got[t].size() * sizeof(float)) == 0);
  }
}

// `count` token ids spread over the vocabulary, for teacher-forcing comparisons.
inline std::vector<uint32_t> spread_ids(uint32_t vocab, uint32_t count = 40) {
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < count; ++i) ids.push_back((i * 37 + 11) % vocab);
  return ids;
}

// The index of g's first task with opcode `op` that `also` accepts; the test fails when g has
// none.
inline uint32_t first_task(const spindle::Graph& g, uint32_t op, auto also) {
  uint32_t i = 0;
  while (i < g.tasks.size() && !(g.tasks[i].op == op && also(g.tasks[i]))) ++i;
  REQUIRE_MESSAGE(i < g.tasks.size(), "the graph has no such task of opcode " << op);
  return i;
}
inline uint32_t first_task(const spindle::Graph& g, uint32_t op) {
  return first_task(g, op, [](const SpTask&) { return true; });
}

// The message of the spindle::Error that f throws, or "(no error)".
inline std::string error_of(auto&& f) {
  try {
    f();
  } catch (const spindle::Error& e) {
    return e.what();
  }
  return "(no error)";
}

// The tiny graph with its sampler waiting for one more lm_head tile than exists: the run must
// end with a watchdog error naming the task, its counter and the target, never hang, and the
// executor must then refuse to run again with a message containing `refusal`.
inline void check_watchdog_trips(const spindle::ExecutorOptions& opt, const std::string& refusal) {
  const TinyModel& m = tiny_model();
  spindle::Graph broken = m.graph;
  broken.tasks.back().wait_count += 1;
  auto ex = spindle::make_executor(broken, m.weights, opt);
  const std::string msg = error_of([&] { spindle::decode(*ex, broken, {1}, 1, {}); });  // one step: one waiter
  CAPTURE(msg);
  CHECK(msg.find("watchdog") != std::string::npos);
  CHECK(msg.find("task " + std::to_string(broken.tasks.size() - 1) + " (sample)") != std::string::npos);
  CHECK(msg.find("(lm_head)") != std::string::npos);
  CHECK(msg.find("needs") != std::string::npos);
  CHECK(error_of([&] { ex->run_steps(1); }).find(refusal) != std::string::npos);
}

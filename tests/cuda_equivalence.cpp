// The CUDA executor in every mode, schedule and worker count gives the sequential CPU
// reference's tokens and logits bit for bit (docs/numerics.md). Needs a GPU.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "host/decode.h"
#include "host/graph_builder.h"
#include "host/model_weights.h"
#include "megakernel/cuda_executor.h"
#include "megakernel/per_op.h"
#include "tests/cuda_fixture.h"
#include "tests/executors_fixture.h"
#include "tests/hand_built_models.h"
#include "tests/split_graphs.h"

using namespace spindle;

namespace {

const std::vector<uint32_t> kPrompt = {3, 141, 59, 26, 5};
constexpr uint32_t kNewTokens = 12;

const Decoded& tiny_reference() {
  static const Decoded d = run_decode(tiny_model().graph, tiny_model().weights, {ExecutorKind::Sequential}, kPrompt, kNewTokens);
  return d;
}

MegakernelTuning with(auto&& f) {
  MegakernelTuning t;
  f(t);
  return t;
}

// The tunings the tests run: the default, every other knob changed, two blocks per SM (with
// a 64-KB preload, so that two fit beside qwen3-0.6b's 128-KB GATE_UP copies), and a weight
// preload that leaves some of tiny's projection tasks reading global memory (its 1-KB tasks
// preloaded, the 2-KB ones not, as qwen3-0.6b's lm_head tasks are by the default).
std::vector<MegakernelTuning> tunings() {
  return {MegakernelTuning{},
          with([](auto& t) {
            t.input_cache = false;
            t.merge_release = true;
            t.first_sleep_ns = 0;
            t.max_sleep_ns = 0;
            t.weight_preload_bytes = 0;
          }),
          with([](auto& t) {
            t.blocks_per_sm = 2;
            t.weight_preload_bytes = 64u << 10;
          }),
          with([](auto& t) { t.weight_preload_bytes = 1024; })};
}

// Every worker count under every tuning of the persistent kernel.
void check_megakernel(ScheduleKind schedule) {
  const TinyModel& m = tiny_model();
  REQUIRE(tiny_reference().tokens.size() == kNewTokens);
  for (const MegakernelTuning& tuning : tunings())
    for (uint32_t workers : {1u, 7u, 66u, 132u}) {
      CAPTURE(workers);
      CudaExecutor ex(m.graph, m.weights, cuda_options(CudaMode::Megakernel, schedule, workers, tuning));
      CAPTURE(ex.describe());
      check_same(run_decode(ex, m.graph, kPrompt, kNewTokens), tiny_reference());
    }
}

// The megakernel and the per-op kernels decode a hand-built model's graph as the sequential
// reference does.
void check_megakernel_and_per_op(const Graph& g, const ModelWeights& w) {
  const std::vector<uint32_t> prompt = {5, 17, 199};
  const Decoded expect = run_decode(g, w, {ExecutorKind::Sequential}, prompt, 10);
  for (CudaMode mode : {CudaMode::Megakernel, CudaMode::PerOp}) {
    CAPTURE(cuda_mode_name(mode));
    check_same(run_decode(g, w, cuda_options(mode), prompt, 10), expect);
  }
}

}  // namespace

TEST_CASE("tiny: the megakernel with the ticket schedule matches the sequential reference, every tuning") {
  check_megakernel(ScheduleKind::Ticket);
}

TEST_CASE("tiny: the megakernel with static lists matches the sequential reference, every tuning") {
  check_megakernel(ScheduleKind::Static);
}

TEST_CASE("tiny: the per-op and CUDA-graph baselines match the sequential reference") {
  const TinyModel& m = tiny_model();
  for (CudaMode mode : {CudaMode::PerOp, CudaMode::Graph}) {
    CAPTURE(cuda_mode_name(mode));
    check_same(run_decode(m.graph, m.weights, cuda_options(mode), kPrompt, kNewTokens), tiny_reference());
  }
}

TEST_CASE("tiny: every position's logits match under teacher forcing") {
  const TinyModel& m = tiny_model();
  const std::vector<uint32_t> ids = spread_ids(m.graph.params.vocab);
  auto ref = make_executor(m.graph, m.weights, {ExecutorKind::Sequential});
  const auto expect = teacher_forced_logits(*ref, m.graph, ids);
  for (CudaMode mode : {CudaMode::Megakernel, CudaMode::PerOp, CudaMode::Graph}) {
    CAPTURE(cuda_mode_name(mode));
    auto ex = make_executor(m.graph, m.weights, cuda_options(mode));
    check_same_rows(teacher_forced_logits(*ex, m.graph, ids), expect);
  }
}

TEST_CASE("tiny: attention staged a few positions at a time (score blocks, K and V tiles) matches, static lists and per-op, q heads split too") {
  // Budgets of a few positions make every chunk take the multi-tile and re-scoring paths; with
  // the q heads split, the second split's tiles stage the step's own K and V rows from k̂ and v.
  const TinyModel& plain = tiny_model();
  const TinyModel split = tiny_q_split_model(3);
  const std::vector<uint32_t> prompt = {17, 4};
  const Decoded expect = run_decode(plain.graph, plain.weights, {ExecutorKind::Sequential}, prompt, 50);
  for (const TinyModel* m : {&plain, &split})
  for (uint32_t kv_positions : {1u, 3u, 4u})
    for (uint32_t score_positions : {2u, 5u, 8u}) {
      const SpGraphParams& p = m->graph.params;
      CAPTURE(p.attn_q_splits);
      CAPTURE(kv_positions);
      CAPTURE(score_positions);
      MegakernelTuning tuning;
      tuning.attn_kv_bytes = kv_positions * 4 * p.head_dim;                                      // K and V, bf16
      tuning.attn_score_bytes = score_positions * 4 * (p.n_heads / p.n_kv_heads / p.attn_q_splits);  // f32 a q head
      for (CudaMode mode : {CudaMode::Megakernel, CudaMode::PerOp}) {
        CAPTURE(cuda_mode_name(mode));
        CudaExecutor ex(m->graph, m->weights, cuda_options(mode, ScheduleKind::Static, 0, tuning));
        check_same(run_decode(ex, m->graph, prompt, 50), expect);
      }
    }
}

TEST_CASE("tiny: short chunks (a warp a q head) and longer ones (the block), one a kv head or several, q heads split or not, match") {
  // Every position's logits over 130 forced tokens: one chunk of 1 to 130 positions, or 4
  // chunks of ceil(n / 4), 1 to 33 positions; the warp path takes chunks of up to 16. The
  // reference is the graph whose q heads are not split.
  const TinyModel& m = tiny_model();
  for (uint32_t chunks : {1u, 4u})
  for (uint32_t q_splits : {1u, 2u}) {
    CAPTURE(chunks);
    CAPTURE(q_splits);
    BuildOptions b;
    b.context = 140;
    b.attn_chunks = chunks;
    b.attn_q_splits = 1;
    const Graph plain = build_decode_graph(m.weights, b);
    b.attn_q_splits = q_splits;
    const Graph g = build_decode_graph(m.weights, b);
    const std::vector<uint32_t> ids = spread_ids(g.params.vocab, 130);
    auto ref = make_executor(plain, m.weights, {ExecutorKind::Sequential});
    const auto expect = teacher_forced_logits(*ref, plain, ids);
    for (CudaMode mode : {CudaMode::Megakernel, CudaMode::PerOp}) {
      CAPTURE(cuda_mode_name(mode));
      auto ex = make_executor(g, m.weights, cuda_options(mode));
      check_same_rows(teacher_forced_logits(*ex, g, ids), expect);
    }
  }
}

TEST_CASE("rows of odd length at unaligned addresses: the megakernel (no weight preload possible) and per-op match") {
  const ModelWeights w = spindle::test::unaligned_model();
  check_megakernel_and_per_op(spindle::test::short_context_graph(w), w);
}

TEST_CASE("dots of exact products summed below f32's normal range (the fused add_product): the megakernel and per-op match") {
  const ModelWeights w = spindle::test::tiny_sums_model();
  check_megakernel_and_per_op(spindle::test::short_context_graph(w), w);
}

TEST_CASE("a GEMV task with more rows than its input has elements reads its residual from global memory, and matches") {
  // o_proj of the unaligned model: 60 rows of K = 48 in one task, more than the norm weights'
  // place that a task's residual rows are staged in; down (K = 100) stages its 60.
  const ModelWeights w = spindle::test::unaligned_model();
  BuildOptions b;
  b.context = 32;
  b.rows_per_tile = 64;
  check_megakernel_and_per_op(build_decode_graph(w, b), w);
}

TEST_CASE("projection rows read from their preloaded copy in shared memory, every group size, match") {
  // 8 warps: 24 rows a task give each warp a GEMV group of 2 rows and one of 1 (a GATE_UP
  // group of 2 pairs and one of 1), 32 rows a group of 4; every task fits the default preload.
  const ModelWeights w = spindle::test::shared_dot_model();
  for (uint32_t rows : {24u, 32u}) {
    CAPTURE(rows);
    BuildOptions b;
    b.context = 32;
    b.attn_chunks = 2;
    b.rows_per_tile = rows;
    check_megakernel_and_per_op(build_decode_graph(w, b), w);
  }
}

TEST_CASE("tiny: one launch of many steps equals one launch per step") {
  const TinyModel& m = tiny_model();
  const std::vector<uint32_t> prompt = {17, 4};
  const Decoded expect = run_decode(m.graph, m.weights, {ExecutorKind::Sequential}, prompt, 50);
  for (uint32_t per_launch : {0u, 1u, 3u}) {
    CAPTURE(per_launch);
    ExecutorOptions o = cuda_options(CudaMode::Megakernel);
    o.steps_per_launch = per_launch;
    check_same(run_decode(m.graph, m.weights, o, prompt, 50), expect);
  }
}

TEST_CASE("tiny: the trace holds one record per task and step") {
  const TinyModel& m = tiny_model();
  for (CudaMode mode : {CudaMode::Megakernel, CudaMode::Graph}) {
    CAPTURE(cuda_mode_name(mode));
    auto ex = make_executor(m.graph, m.weights, cuda_options(mode));
    ex->set_tracing(true);
    decode(*ex, m.graph, kPrompt, 3, {});
    const uint32_t steps = uint32_t(kPrompt.size()) - 1 + 3;
    REQUIRE(ex->trace().size() == size_t(steps) * m.graph.tasks.size());
    std::set<std::pair<uint32_t, uint32_t>> seen;
    for (const TaskTrace& t : ex->trace()) {
      CHECK(t.end_ns >= t.start_ns);
      CHECK(t.step < steps);
      seen.emplace(t.step, t.task);
    }
    CHECK(seen.size() == ex->trace().size());
  }
}

// The megakernel's ticket schedule claims each stage (a run of tasks signalling one counter)
// from its own counter, a block taking at most ceil(tasks / blocks) tasks of a stage in a step
// (docs/isa.md): with one block an SM, the trace's SM is the block.
// A layer's qkv stages a kv head (BuildOptions::kv_head_waits) count as the one stage they
// replace: named "<its name>.kv<g>", they share its quota.
TEST_CASE("tiny: with tickets, no block runs more than its share of a stage in a step, qkv stages a kv head too") {
  for (const Graph* g : {&tiny_model().graph, &tiny_head_waits_model().graph}) {
    std::map<std::string, uint32_t> stage_tasks;  // stage name -> tasks a step
    std::vector<std::string> stage_of;
    for (const SpTask& t : g->tasks) {
      const std::string name = g->counter_names[t.signal_counter];
      stage_of.push_back(name.substr(0, name.find(".kv")));
      ++stage_tasks[stage_of.back()];
    }
    for (uint32_t workers : {1u, 7u, 132u}) {
      CAPTURE(workers);
      CudaExecutor ex(*g, tiny_model().weights, cuda_options(CudaMode::Megakernel, ScheduleKind::Ticket, workers));
      ex.set_tracing(true);
      decode(ex, *g, kPrompt, 3, {});
      REQUIRE(ex.trace().size() == (kPrompt.size() - 1 + 3) * g->tasks.size());
      std::map<std::tuple<uint32_t, std::string, uint32_t>, uint32_t> taken;  // (step, stage, SM) -> tasks
      for (const TaskTrace& t : ex.trace()) ++taken[{t.step, stage_of[t.task], t.worker}];
      for (const auto& [key, tasks] : taken) {
        CAPTURE(std::get<1>(key));
        CHECK(tasks <= (stage_tasks[std::get<1>(key)] + ex.workers() - 1) / ex.workers());
      }
    }
  }
}

TEST_CASE("qwen3-0.6b shapes: every mode matches the sequential reference, with a qkv stage a kv head too") {
  const ModelWeights w = load_model("synthetic:qwen3-0.6b");
  BuildOptions b;
  b.context = 128;
  b.attn_chunks = 4;
  const Graph g = build_decode_graph(w, b);
  const std::vector<uint32_t> prompt = {9, 151000, 42};
  const Decoded expect = run_decode(g, w, {ExecutorKind::Sequential}, prompt, 3);
  for (const MegakernelTuning& tuning : tunings())
    for (ScheduleKind schedule : {ScheduleKind::Ticket, ScheduleKind::Static}) {
      CAPTURE(schedule_kind_name(schedule));
      CudaExecutor ex(g, w, cuda_options(CudaMode::Megakernel, schedule, schedule == ScheduleKind::Static ? 66 : 0, tuning));
      CAPTURE(ex.describe());
      check_same(run_decode(ex, g, prompt, 3), expect);
    }
  check_same(run_decode(g, w, cuda_options(CudaMode::PerOp), prompt, 3), expect);
  check_same(run_decode(g, w, cuda_options(CudaMode::Graph), prompt, 3), expect);
  b.kv_head_waits = true;  // a schedule: the same bits
  const Graph heads = build_decode_graph(w, b);
  for (ScheduleKind schedule : {ScheduleKind::Ticket, ScheduleKind::Static})
    for (uint32_t n : {7u, 132u}) {
      CAPTURE(schedule_kind_name(schedule));
      CAPTURE(n);
      check_same(run_decode(heads, w, cuda_options(CudaMode::Megakernel, schedule, n), prompt, 3), expect);
    }
  for (CudaMode mode : {CudaMode::PerOp, CudaMode::Graph}) check_same(run_decode(heads, w, cuda_options(mode), prompt, 3), expect);
}

// Every mode: the megakernel's two-hop build runs these graphs (both schedules), as do the
// per-op and CUDA-graph baselines.
void check_every_mode(const Graph& g, const ModelWeights& w, const std::vector<uint32_t>& prompt, uint32_t new_tokens,
                      const Decoded& expect, std::initializer_list<uint32_t> workers) {
  for (ScheduleKind schedule : {ScheduleKind::Ticket, ScheduleKind::Static})
    for (uint32_t n : workers) {
      CAPTURE(schedule_kind_name(schedule));
      CAPTURE(n);
      CudaExecutor ex(g, w, cuda_options(CudaMode::Megakernel, schedule, n));
      CAPTURE(ex.describe());
      check_same(run_decode(ex, g, prompt, new_tokens), expect);
    }
  for (CudaMode mode : {CudaMode::PerOp, CudaMode::Graph}) {
    CAPTURE(cuda_mode_name(mode));
    check_same(run_decode(g, w, cuda_options(mode), prompt, new_tokens), expect);
  }
}

TEST_CASE("tiny: o_proj and down split into pieces, every mode matches the sequential reference, o_proj's pieces a kv head too") {
  const TinyModel& m = tiny_split_model();
  const Decoded expect = run_decode(m.graph, m.weights, {ExecutorKind::Sequential}, kPrompt, kNewTokens);
  check_every_mode(m.graph, m.weights, kPrompt, kNewTokens, expect, {1, 132});
  const TinyModel& pieces = tiny_head_pieces_model();
  check_every_mode(pieces.graph, pieces.weights, kPrompt, kNewTokens, expect, {1, 7, 132});
}

// tiny's MLP stage has 16 tasks: from 16 blocks on, the megakernel runs each gang's 4 members at
// once; with fewer, whole.
TEST_CASE("tiny: the MLP as gangs, every mode and worker count, gives the down split's bits") {
  const TinyModel& m = tiny_fused_mlp_model();
  const TinyModel& split = tiny_split_model();
  const Decoded expect = run_decode(split.graph, split.weights, {ExecutorKind::Sequential}, kPrompt, kNewTokens);
  check_every_mode(m.graph, m.weights, kPrompt, kNewTokens, expect, {1, 7, 66, 132});
}

TEST_CASE("qwen3-0.6b shapes, o_proj and down split as the two-hop layer sums them: every mode matches, MLP gangs and o_proj pieces a kv head too") {
  const ModelWeights w = load_model("synthetic:qwen3-0.6b");
  const Graph g = qwen06b_graph(w, TwoHop::Split);  // its split changes bits (executors_determinism.cpp)
  const std::vector<uint32_t> prompt = {9, 151000, 42};
  const Decoded expect_06b = run_decode(g, w, {ExecutorKind::Sequential}, prompt, 3);
  check_every_mode(g, w, prompt, 3, expect_06b, {132});
  // 128 MLP tasks: 132 blocks run the gangs' members at once, 66 run them whole.
  check_every_mode(qwen06b_graph(w, TwoHop::FusedMlp), w, prompt, 3, expect_06b, {66, 132});
  check_every_mode(qwen06b_graph(w, TwoHop::HeadPieces), w, prompt, 3, expect_06b, {132});
}

TEST_CASE("the megakernel's two-hop and MoE builds run 1 block an SM and say so when asked for 2") {
  MegakernelTuning two;
  two.blocks_per_sm = 2;
  const TinyModel& m = tiny_fused_mlp_model();
  std::string msg = error_of([&] { CudaExecutor ex(m.graph, m.weights, cuda_options(CudaMode::Megakernel, ScheduleKind::Ticket, 0, two)); });
  CAPTURE(msg);
  CHECK(msg.find("the megakernel's two-hop build (the graph's ops need it) runs 1 block an SM, not 2") != std::string::npos);
  const ModelWeights moe = load_model("synthetic:tiny-moe");
  BuildOptions o;
  o.context = 64;
  const Graph g = build_decode_graph(moe, o);
  msg = error_of([&] { CudaExecutor ex(g, moe, cuda_options(CudaMode::Megakernel, ScheduleKind::Ticket, 0, two)); });
  CHECK(msg.find("the megakernel's MoE build (the graph's ops need it) runs 1 block an SM, not 2") != std::string::npos);
}

// The configuration `spindle bench` stalled in with static lists (qwen3-0.6b, context 4161,
// so 16 attention chunks; every SM a block): each release mode must finish and match.
TEST_CASE("qwen3-0.6b at context 4161: static and ticket on every SM match the sequential reference") {
  const ModelWeights w = load_model("synthetic:qwen3-0.6b");
  BuildOptions b;
  b.context = 4161;
  const Graph g = build_decode_graph(w, b);
  const std::vector<uint32_t> prompt = {5, 77, 1234};
  const Decoded expect = run_decode(g, w, {ExecutorKind::Sequential}, prompt, 4);
  for (bool merge : {false, true})
    for (ScheduleKind schedule : {ScheduleKind::Ticket, ScheduleKind::Static}) {
      MegakernelTuning tuning;
      tuning.merge_release = merge;
      CAPTURE(merge);
      CAPTURE(schedule_kind_name(schedule));
      CudaExecutor ex(g, w, cuda_options(CudaMode::Megakernel, schedule, 132, tuning));
      check_same(run_decode(ex, g, prompt, 4), expect);
    }
}

// The routing (every expert gate/up task's) with 37 experts, 5 a token (odd_experts_model), and
// with every logit tied with another (tied_experts_model); with more groups of 32 experts than a
// block has warps (300, 10 a token, tied) and with every expert a candidate (k above 32): every
// mode (the megakernel's MoE build), and the two-hop build, against the sequential reference.
TEST_CASE("MoE with 37, 70 or 300 experts, 5 to 33 a token, logits tied or not: every mode matches the sequential reference") {
  for (const ModelWeights& w : {test::odd_experts_model(), test::tied_experts_model(),
                                test::experts_model("many-tied-experts", 300, 10, true),
                                test::experts_model("experts-33-a-token", 70, 33, false)}) {
    CAPTURE(w.source);
    BuildOptions o;
    o.context = 64;
    std::vector<Graph> graphs{build_decode_graph(w, o)};
    o.o_proj_split = {2, 0};  // the persistent kernel's two-hop build
    graphs.push_back(build_decode_graph(w, o));
    for (size_t i = 0; i < graphs.size(); ++i) {
      CAPTURE(i);
      const Graph& g = graphs[i];
      const Decoded expect = run_decode(g, w, {ExecutorKind::Sequential}, kPrompt, kNewTokens);
      for (uint32_t n : {3u, 132u}) {
        CAPTURE(n);
        CudaExecutor ex(g, w, cuda_options(CudaMode::Megakernel, ScheduleKind::Ticket, n));
        check_same(run_decode(ex, g, kPrompt, kNewTokens), expect);
      }
      for (CudaMode mode : {CudaMode::PerOp, CudaMode::Graph}) {
        CAPTURE(cuda_mode_name(mode));
        check_same(run_decode(g, w, cuda_options(mode), kPrompt, kNewTokens), expect);
      }
    }
  }
}

// The MoE tiles: the router's logits and its choice of experts (the last of its tasks to arrive
// routes), the routed gate-and-up and down rows. The router in one task and in three (three rows
// a task, expert tasks across two slots' rows), in the megakernel's MoE build; the two-hop build
// (o_proj split) as well.
TEST_CASE("tiny-moe: every mode, schedule and worker count matches the sequential reference, the router in 1 or 3 tasks") {
  const ModelWeights w = load_model("synthetic:tiny-moe");
  BuildOptions o;
  o.context = 64;
  o.attn_chunks = 3;
  std::vector<Graph> graphs{build_decode_graph(w, o)};
  o.rows_per_tile = 3;
  graphs.push_back(build_decode_graph(w, o));
  o.rows_per_tile = 0;
  o.o_proj_split = {2, 0};  // split GEMV dots: the persistent kernel's two-hop build
  graphs.push_back(build_decode_graph(w, o));
  for (size_t i = 0; i < graphs.size(); ++i) {
    CAPTURE(i);
    const Graph& g = graphs[i];
    const Decoded expect = run_decode(g, w, {ExecutorKind::Sequential}, kPrompt, kNewTokens);
    for (const MegakernelTuning& tuning : {MegakernelTuning{}, tunings()[1]})
      for (ScheduleKind schedule : {ScheduleKind::Ticket, ScheduleKind::Static})
        for (uint32_t n : {1u, 3u, 66u, 132u}) {
          CAPTURE(schedule_kind_name(schedule));
          CAPTURE(n);
          CudaExecutor ex(g, w, cuda_options(CudaMode::Megakernel, schedule, n, tuning));
          CAPTURE(ex.describe());
          // The graphs without a split run in the MoE build, the split one in the two-hop build.
          CHECK(ex.describe().find(i < 2 ? ", MoE build" : ", two-hop build") != std::string::npos);
          check_same(run_decode(ex, g, kPrompt, kNewTokens), expect);
        }
    for (CudaMode mode : {CudaMode::PerOp, CudaMode::Graph}) {
      CAPTURE(cuda_mode_name(mode));
      check_same(run_decode(g, w, cuda_options(mode), kPrompt, kNewTokens), expect);
    }
  }
}

TEST_CASE("the hybrid families (GDN, gated attention, the shared expert): every mode, schedule and worker count matches the sequential reference, GDN gangs too") {
  for (const char* preset : kHybridPresets) {
    CAPTURE(preset);
    const ModelWeights w = load_model(preset);
    BuildOptions o;
    o.context = 64;
    o.attn_chunks = 3;
    std::vector<Graph> graphs{build_decode_graph(w, o)};
    o.attn_chunks = 1;  // one chunk a kv head: the q heads split over tiles, merged at once
    graphs.push_back(build_decode_graph(w, o));
    // GDN gangs of 4 (16 tasks a GDN stage): 132 blocks run the members at once, 1 and 3 whole.
    o.gdn_gang = 4;
    graphs.push_back(build_decode_graph(w, o));
    for (size_t i = 0; i < graphs.size(); ++i) {
      CAPTURE(i);
      const Graph& g = graphs[i];
      const Decoded expect = run_decode(g, w, {ExecutorKind::Sequential}, kPrompt, kNewTokens);
      for (ScheduleKind schedule : {ScheduleKind::Ticket, ScheduleKind::Static})
        for (uint32_t n : {1u, 3u, 132u}) {
          CAPTURE(schedule_kind_name(schedule));
          CAPTURE(n);
          check_same(run_decode(g, w, cuda_options(CudaMode::Megakernel, schedule, n), kPrompt, kNewTokens), expect);
        }
      for (CudaMode mode : {CudaMode::PerOp, CudaMode::Graph}) {
        CAPTURE(cuda_mode_name(mode));
        check_same(run_decode(g, w, cuda_options(mode), kPrompt, kNewTokens), expect);
      }
    }
  }
}

TEST_CASE("qwen3.5-0.8b shapes (head dim 256, 128-element GDN heads): the megakernel and per-op match the sequential reference, GDN gangs or not") {
  const ModelWeights w = load_model("synthetic:qwen3.5-0.8b");
  BuildOptions o;
  o.context = 16;
  const Graph g = build_decode_graph(w, o);  // GDN gangs of 8, 16 rows a member, run at once
  const std::vector<uint32_t> prompt = {3, 141, 59};
  const Decoded expect = run_decode(g, w, {ExecutorKind::Sequential}, prompt, 4);
  check_same(run_decode(g, w, cuda_options(CudaMode::Megakernel), prompt, 4), expect);
  check_same(run_decode(g, w, cuda_options(CudaMode::PerOp), prompt, 4), expect);
  o.gdn_gang = 1;  // a task a value head
  check_same(run_decode(build_decode_graph(w, o), w, cuda_options(CudaMode::Megakernel), prompt, 4), expect);
}

TEST_CASE("o_proj and down as PIECE_DOTS and PIECE_SUM tasks (a row-parallel projection's): the per-op and graph modes give the split GEMV's tokens and logits") {
  const ModelWeights w = load_model("synthetic:tiny");
  const test::SplitAndPieces g = test::split_and_piece_sums(w);
  const Decoded expect = run_decode(g.split, w, {ExecutorKind::Sequential}, kPrompt, kNewTokens);
  for (CudaMode mode : {CudaMode::PerOp, CudaMode::Graph}) {
    CAPTURE(cuda_mode_name(mode));
    check_same(run_decode(g.pieces, w, cuda_options(mode), kPrompt, kNewTokens), expect);
  }
}

TEST_CASE("the experts' down in pieces (expert-down-split, and shared-down-split apart): the per-op and graph modes match the sequential reference, the megakernel refuses them") {
  for (const char* preset : {"synthetic:tiny-moe", "synthetic:tiny-qwen3.5-moe", "synthetic:tiny-qwen3-next"}) {
    CAPTURE(preset);
    const ModelWeights w = load_model(preset);
    // {routed, shared}: the shared expert's split as the routed one's (pieces 0), its own with
    // the routed dots whole (expert parallel's numerics), or its rows whole (pieces 1).
    for (const test::DownSplits& s : {test::DownSplits{{2, 2}, {0, 0}}, test::DownSplits{{4, 2}, {0, 0}},
                                      test::DownSplits{{}, {2, 2}}, test::DownSplits{{2, 2}, {1, 0}}}) {
      if (s.shared.pieces && !has_shared_expert(w.config.family)) continue;
      CAPTURE(s.routed.pieces);
      CAPTURE(s.shared.pieces);
      const Graph g = build_decode_graph(w, test::expert_down_split_options(s));
      REQUIRE(first_task(g, SP_OP_EXPERT_DOWN_PIECE) < g.tasks.size());
      const Decoded expect = run_decode(g, w, {ExecutorKind::Sequential}, kPrompt, kNewTokens);
      const uint32_t piece = first_task(g, SP_OP_EXPERT_DOWN_PIECE);
      CHECK(error_of([&] { CudaExecutor ex(g, w, cuda_options(CudaMode::Megakernel)); }) ==
            "cuda megakernel: task " + std::to_string(piece) +
                " (expert_down_piece) has no tile in the persistent kernel yet; the per-op and graph modes run it "
                "(--profile per-op, --profile graph)");
      for (CudaMode mode : {CudaMode::PerOp, CudaMode::Graph}) {
        CAPTURE(cuda_mode_name(mode));
        check_same(run_decode(g, w, cuda_options(mode), kPrompt, kNewTokens), expect);
      }
    }
  }
}

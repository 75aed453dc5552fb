// The Vulkan executor gives the sequential CPU reference's tokens and logits bit for bit
// (docs/numerics.md), whatever the workgroup count, the warps per workgroup, or how many
// dispatches a run takes. On lavapipe in CI; on any Vulkan device.
#include <doctest/doctest.h>

#include <memory>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "host/checkpoint.h"
#include "host/decode.h"
#include "host/gates.h"
#include "host/graph_builder.h"
#include "host/synthetic.h"
#include "host/vulkan_executor.h"
#include "ops/bf16.h"
#include "tests/executors_fixture.h"
#include "tests/hand_built_models.h"
#include "tests/split_graphs.h"
#include "tests/vulkan_fixture.h"

using namespace spindle;
using namespace spindle::test;

namespace {

const std::vector<uint32_t> kPrompt = {3, 141, 59, 26, 5};
constexpr uint32_t kNewTokens = 12;

const Decoded& tiny_reference() {
  static const Decoded d = [] {
    const TinyModel& m = tiny_model();
    auto ex = make_executor(m.graph, m.weights, {ExecutorKind::Sequential});
    return run_decode(*ex, m.graph, kPrompt, kNewTokens);
  }();
  return d;
}

// A model whose projections span several 256-element blocks, a partial trip for every dot
// unroll depth: hidden 1096 = 4 blocks + 72, intermediate 2120 = 8 blocks + 72; 16-byte reads.
ModelWeights wide_model() { return model_with("wide", 1096, 16, 2120, 16); }

}  // namespace

TEST_CASE("vulkan: tiny greedy decode equals the sequential reference for every workgroup count and warp count") {
  const TinyModel& m = tiny_model();
  REQUIRE(tiny_reference().tokens.size() == kNewTokens);
  for (uint32_t warps : {1u, 2u, 8u})
    for (uint32_t workers : {1u, 2u, 3u, 8u}) {
      if (warps == 8 && workers != 3 && on_lavapipe()) continue;
      CAPTURE(warps);
      CAPTURE(workers);
      VulkanExecutor ex(m.graph, m.weights, vulkan_options(workers, {warps, 0}));
      check_same(run_decode(ex, m.graph, kPrompt, kNewTokens), tiny_reference());
      MESSAGE(ex.describe() << ": " << ex.last_run_dispatches() << " dispatches for the last " << kNewTokens << " steps");
    }
}

TEST_CASE("vulkan: a qkv stage a kv head (attention waiting per kv head) gives the reference's tokens and logits") {
  const Graph& g = tiny_head_waits_model().graph;
  for (uint32_t workers : {1u, 3u, 8u}) {
    CAPTURE(workers);
    VulkanExecutor ex(g, tiny_model().weights, vulkan_options(workers, {2, 0}));
    check_same(run_decode(ex, g, kPrompt, kNewTokens), tiny_reference());
  }
}

TEST_CASE("vulkan: each kv head's q heads split over tiles, one chunk or several, give the reference's tokens and logits") {
  for (uint32_t chunks : {1u, 3u}) {
    CAPTURE(chunks);
    const TinyModel m = tiny_q_split_model(chunks);
    BuildOptions o;
    o.context = 64;
    o.attn_chunks = chunks;
    o.attn_q_splits = 1;
    const Decoded expect =
        run_decode(build_decode_graph(m.weights, o), m.weights, {ExecutorKind::Sequential}, kPrompt, kNewTokens);
    for (uint32_t workers : {1u, 3u}) {
      CAPTURE(workers);
      VulkanExecutor ex(m.graph, m.weights, vulkan_options(workers, {2, 0}));
      check_same(run_decode(ex, m.graph, kPrompt, kNewTokens), expect);
    }
  }
}

// Two warps split a task's 8 rows between them, eight give each a row: on the first graph only,
// and not on lavapipe (vulkan_fixture.h).
TEST_CASE("vulkan: o_proj and down split into pieces, the MLP as gangs, or o_proj as pieces a kv head give the sequential split reference's tokens") {
  const TinyModel& m = tiny_split_model();
  auto ref = make_executor(m.graph, m.weights, {ExecutorKind::Sequential});
  const Decoded expect = run_decode(*ref, m.graph, kPrompt, kNewTokens);
  for (const TinyModel* run : {&m, &tiny_fused_mlp_model(), &tiny_head_pieces_model()})
    for (const auto& [warps, workers] : {std::pair{1u, 1u}, {1u, 3u}, {2u, 3u}, {8u, 3u}}) {
      if (warps == 8 && (run != &m || on_lavapipe())) continue;
      CAPTURE(run == &m ? "split" : run == &tiny_fused_mlp_model() ? "MLP gangs" : "o_proj pieces");
      CAPTURE(warps);
      CAPTURE(workers);
      VulkanExecutor ex(run->graph, run->weights, vulkan_options(workers, {warps, 0}));
      check_same(run_decode(ex, run->graph, kPrompt, kNewTokens), expect);
    }
}

// tiny's split changes no output bit (executors_fixture.h), so only this test can tell a shader
// that ignored the split; it needs a GPU (on lavapipe qwen3-0.6b runs past the loop limit).
TEST_CASE("vulkan: qwen3-0.6b with o_proj and down split as the two-hop layer sums them, MLP gangs and o_proj pieces too, gives the reference's logits") {
  if (on_lavapipe()) return;
  const ModelWeights w = load_model("synthetic:qwen3-0.6b");
  const Graph g = qwen06b_graph(w, TwoHop::Split);
  const std::vector<uint32_t> prompt = {9, 151000, 42};
  const Decoded expect = run_decode(g, w, {ExecutorKind::Sequential}, prompt, 3);
  for (TwoHop two_hop : {TwoHop::Split, TwoHop::FusedMlp, TwoHop::HeadPieces}) {
    CAPTURE(int(two_hop));
    const Graph run = qwen06b_graph(w, two_hop);
    VulkanExecutor ex(run, w, vulkan_options(0));
    check_same(run_decode(ex, run, prompt, 3), expect);
  }
}

TEST_CASE("vulkan: any split of the butterfly between shared memory and shuffles, and either poll, changes nothing") {
  const TinyModel& m = tiny_model();
  for (uint32_t width : {1u, 2u, 4u, 8u}) {  // 1: shared memory only; lavapipe's subgroups are 8 wide
    CAPTURE(width);
    VulkanExecutor ex(m.graph, m.weights, vulkan_options(2, {2, 0, width}));
    check_same(run_decode(ex, m.graph, kPrompt, kNewTokens), tiny_reference());
  }
  for (VulkanPoll poll : {VulkanPoll::AtomicAdd, VulkanPoll::Load}) {
    CAPTURE(int(poll));
    VulkanExecutor ex(m.graph, m.weights, vulkan_options(2, {2, 0, 0, poll}));
    check_same(run_decode(ex, m.graph, kPrompt, kNewTokens), tiny_reference());
  }
}

TEST_CASE("vulkan: rows of odd length at unaligned addresses (2-byte loads) give the sequential reference's tokens") {
  const ModelWeights w = unaligned_model();
  const Graph g = short_context_graph(w);
  const std::vector<uint32_t> prompt = {5, 17, 199};
  const Decoded expect = run_decode(g, w, {ExecutorKind::Sequential}, prompt, 10);
  for (uint32_t warps : {1u, on_lavapipe() ? 2u : 8u}) {
    CAPTURE(warps);
    VulkanExecutor ex(g, w, vulkan_options(2, {warps, 0}));
    check_same(run_decode(ex, g, prompt, 10), expect);
  }
}

TEST_CASE("vulkan: every dot and attention unroll depth and 16 warps (4 on lavapipe) give the reference's tokens and logits") {
  const ModelWeights w = wide_model();
  const Graph g = short_context_graph(w);
  const std::vector<uint32_t> prompt = {5, 17, 199, 3, 80, 41, 9};  // up to 8 positions a chunk
  const Decoded expect = run_decode(g, w, {ExecutorKind::Sequential}, prompt, 6);
  auto tuned = [](uint32_t warps, uint32_t dot, uint32_t attn) {
    VulkanTuning t;
    t.warps = warps;
    t.dot_unroll = dot;
    t.attn_unroll = attn;
    return t;
  };
  for (const VulkanTuning& t : {tuned(1, 1, 1), tuned(2, 2, 2), tuned(2, 8, 8), tuned(on_lavapipe() ? 4 : 16, 4, 4)}) {
    CAPTURE(t.warps);
    CAPTURE(t.dot_unroll);
    CAPTURE(t.attn_unroll);
    VulkanExecutor ex(g, w, vulkan_options(2, t));
    check_same(run_decode(ex, g, prompt, 6), expect);
    MESSAGE(ex.describe() << ": " << ex.last_run_dispatches() << " dispatches for the last 6 steps");
  }
}

TEST_CASE("vulkan: the default dot unroll is the deepest whose trip fits in the smallest projection input") {
  // {hidden, head_dim, intermediate}: with tiny's 4 q heads the smallest K is min(hidden, 4 * head_dim).
  struct Case {
    uint32_t hidden, head_dim, intermediate, unroll;
  };
  for (const Case& c : {Case{64, 16, 128, 1},        // K 64 < 256
                        Case{1096, 16, 2120, 1},     // o_proj's K 64
                        Case{512, 128, 1024, 2},     // K 512 = 2 blocks
                        Case{1024, 256, 2048, 4},    // K 1024 = 4 blocks
                        Case{2048, 256, 2048, 4}}) {  // hidden fits 8 blocks, o_proj's K 1024 does not
    CAPTURE(c.hidden);
    CAPTURE(c.head_dim);
    const ModelWeights w = model_with("unroll", c.hidden, c.head_dim, c.intermediate, 16);
    const Graph g = short_context_graph(w);
    const VulkanExecutor ex(g, w, vulkan_options(1));
    CHECK(ex.describe().find("dot unroll " + std::to_string(c.unroll) + ",") != std::string::npos);
  }
}

TEST_CASE("vulkan: the default attention unroll is 1 on lavapipe, 4 on other devices") {
  const TinyModel& m = tiny_model();
  const VulkanExecutor ex(m.graph, m.weights, vulkan_options(1));
  CHECK(ex.describe().find(std::string("attention unroll ") + (on_lavapipe() ? "1" : "4") + ")") != std::string::npos);
}

// The MoE tiles: the router's logits and its choice of experts (the last of its tasks to arrive
// routes), the routed gate-and-up and down rows. The router in one task and in three (three rows
// a task, expert tasks across two slots' rows), warps past a task's last row included; 8 warps
// on the first graph only, and not on lavapipe (vulkan_fixture.h).
TEST_CASE("vulkan: tiny-moe greedy decode equals the sequential reference at 1 and 3 workgroups, the router in 1 or 3 tasks") {
  const ModelWeights w = load_model("synthetic:tiny-moe");
  BuildOptions o;
  o.context = 64;
  o.attn_chunks = 3;
  for (uint32_t rows_per_tile : {0u, 3u}) {
    o.rows_per_tile = rows_per_tile;
    const Graph g = build_decode_graph(w, o);
    const Decoded expect = run_decode(g, w, {ExecutorKind::Sequential}, kPrompt, kNewTokens);
    for (const auto& [warps, workers] : {std::pair{1u, 1u}, {1u, 3u}, {2u, 3u}, {8u, 3u}}) {
      if (warps == 8 && (rows_per_tile != 0 || on_lavapipe())) continue;
      CAPTURE(rows_per_tile);
      CAPTURE(warps);
      CAPTURE(workers);
      VulkanExecutor ex(g, w, vulkan_options(workers, {warps, 0}));
      check_same(run_decode(ex, g, kPrompt, kNewTokens), expect);
    }
  }
}

TEST_CASE("vulkan: tiny-moe with its routing weights not renormalised (norm_topk_prob false) equals the sequential reference") {
  ModelWeights w = load_model("synthetic:tiny-moe");
  BuildOptions o;
  o.context = 64;
  const Decoded renormalised = run_decode(build_decode_graph(w, o), w, {ExecutorKind::Sequential}, kPrompt, kNewTokens);
  w.config.norm_topk_prob = false;
  const Graph g = build_decode_graph(w, o);
  const Decoded expect = run_decode(g, w, {ExecutorKind::Sequential}, kPrompt, kNewTokens);
  CHECK(expect.logits != renormalised.logits);  // a shader that renormalised anyway would fail below
  VulkanExecutor ex(g, w, vulkan_options(3));
  check_same(run_decode(ex, g, kPrompt, kNewTokens), expect);
}

// The routing's partial rounds (odd_experts_model: 37 experts, 5 a token): one warp places the
// experts in two rounds, the second short. Few steps: lavapipe runs it slowly.
TEST_CASE("vulkan: an MoE of 37 experts, 5 a token, equals the sequential reference") {
  const ModelWeights w = odd_experts_model();
  BuildOptions o;
  o.context = 16;
  const Graph g = build_decode_graph(w, o);
  const std::vector<uint32_t> prompt = {3, 141};
  const Decoded expect = run_decode(g, w, {ExecutorKind::Sequential}, prompt, 3);
  VulkanExecutor ex(g, w, vulkan_options(2, {1, 0}));
  check_same(run_decode(ex, g, prompt, 3), expect);
}

TEST_CASE("vulkan: gated attention (qwen3_5's, every layer full attention) equals the sequential reference, one chunk or three") {
  ModelConfig c = synthetic_config("tiny-qwen3.5");
  c.layer_types.assign(c.n_layers, LayerType::FullAttention);
  const ModelWeights w = test::weights_for("gated attention", c, 64);
  BuildOptions o;
  o.context = 64;
  for (uint32_t chunks : {1u, 3u}) {
    CAPTURE(chunks);
    o.attn_chunks = chunks;
    const Graph g = build_decode_graph(w, o);
    REQUIRE(std::any_of(g.tasks.begin(), g.tasks.end(), [](const SpTask& t) { return t.op == SP_OP_GATED_ATTENTION; }));
    const Decoded expect = run_decode(g, w, {ExecutorKind::Sequential}, kPrompt, kNewTokens);
    for (uint32_t warps : {1u, 2u}) {
      CAPTURE(warps);
      VulkanExecutor ex(g, w, vulkan_options(3, {warps, 0}));
      check_same(run_decode(ex, g, kPrompt, kNewTokens), expect);
    }
  }
}

// The hybrid families' ops together: GDN, gated attention and, in the MoE hybrids, the shared
// expert. The recurrent state is cleared for each sequence (Executor::clear_recurrent_state), so
// a second decode on the same executor repeats the first. One warp: lavapipe compiles the shader
// anew for each graph's ops and warp count (up to two minutes for the MoE hybrids), and at one
// warp the MoE presets share a compilation with each other and with the HF hybrid fixtures; the
// next case runs every op at two.
TEST_CASE("vulkan: the hybrid families (GDN, gated attention, the shared expert) equal the sequential reference, decode after decode") {
  constexpr uint32_t kTokens = 6;
  for (const char* preset : kHybridPresets) {
    CAPTURE(preset);
    const ModelWeights w = load_model(preset);
    BuildOptions o;
    o.context = 64;
    o.attn_chunks = 3;
    const Graph g = build_decode_graph(w, o);
    const Decoded expect = run_decode(g, w, {ExecutorKind::Sequential}, kPrompt, kTokens);
    VulkanExecutor ex(g, w, vulkan_options(3, {1, 0}));
    for (int run = 0; run < 2; ++run) {
      CAPTURE(run);
      check_same(run_decode(ex, g, kPrompt, kTokens), expect);
    }
  }
}

TEST_CASE("vulkan: the experts' down in pieces, and the shared expert's apart (expert-down-split, shared-down-split), "
          "equal the sequential reference") {
  constexpr uint32_t kTokens = 4;
  // {preset, routed, shared}: the shared expert's split as the routed one's (pieces 0), its own
  // with the routed dots whole, or its rows whole (pieces 1).
  struct Case {
    const char* preset;
    DownSplits splits;
  };
  const Case cases[] = {{"synthetic:tiny-moe", {{2, 2}, {0, 0}}},
                        {"synthetic:tiny-qwen3.5-moe", {{4, 2}, {0, 0}}},
                        {"synthetic:tiny-qwen3.5-moe", {{}, {2, 2}}},
                        {"synthetic:tiny-qwen3.5-moe", {{2, 2}, {1, 0}}}};
  for (const Case& c : cases) {
    CAPTURE(c.preset);
    CAPTURE(c.splits.routed.pieces);
    CAPTURE(c.splits.shared.pieces);
    const ModelWeights w = load_model(c.preset);
    const Graph g = build_decode_graph(w, expert_down_split_options(c.splits));
    REQUIRE(first_task(g, SP_OP_EXPERT_DOWN_SUM) < g.tasks.size());
    const Decoded expect = run_decode(g, w, {ExecutorKind::Sequential}, kPrompt, kTokens);
    VulkanExecutor ex(g, w, vulkan_options(3, {2, 0}));
    check_same(run_decode(ex, g, kPrompt, kTokens), expect);
  }
}

TEST_CASE("vulkan: o_proj and down as PIECE_DOTS and PIECE_SUM tasks (a row-parallel projection's) give the split "
          "GEMV's tokens and logits") {
  const ModelWeights& w = tiny_model().weights;
  const SplitAndPieces g = split_and_piece_sums(w);
  const Decoded expect = run_decode(g.split, w, {ExecutorKind::Sequential}, kPrompt, kNewTokens);
  VulkanExecutor ex(g.pieces, w, vulkan_options(3, {2, 0}));
  check_same(run_decode(ex, g.pieces, kPrompt, kNewTokens), expect);
}

// What the presets leave out, at two warps: key heads of 36 elements (the last lane's run
// partial), value heads of 21 (a warp past the last row), three value heads to a key head, a
// shared expert of 44 (a partial octet), every tensor at a 2-byte boundary (the weights' 2-byte
// loads), one attention chunk a kv head; GDN records of two heads each, or gangs of three
// sharing a head (run whole: rank 0's record the head).
TEST_CASE("vulkan: GDN heads and a shared expert of odd sizes, two heads a record or gangs, two warps, equal the sequential reference") {
  ModelConfig c = synthetic_config("tiny-qwen3.5-moe");
  c.linear_num_key_heads = 1;
  c.linear_num_value_heads = 3;
  c.linear_key_head_dim = 36;
  c.linear_value_head_dim = 21;
  c.shared_intermediate = 44;
  const ModelWeights w = test::weights_for("odd GDN heads", c, sizeof(bf16));
  BuildOptions o;
  o.context = 16;
  o.attn_chunks = 1;
  o.stage_tasks = 2;
  for (uint32_t gang : {1u, 3u}) {
    CAPTURE(gang);
    o.gdn_gang = gang;
    const Graph g = build_decode_graph(w, o);
    REQUIRE(std::any_of(g.tasks.begin(), g.tasks.end(), [&](const SpTask& t) {
      return t.op == SP_OP_GDN && (gang == 1 ? t.tile_end - t.tile_begin == 2 * 21 : t.gang_width == gang);
    }));
    const Decoded expect = run_decode(g, w, {ExecutorKind::Sequential}, kPrompt, 4);
    VulkanExecutor ex(g, w, vulkan_options(2, {2, 0}));
    check_same(run_decode(ex, g, kPrompt, 4), expect);
  }
}

TEST_CASE("vulkan: tiny-tied greedy decode equals the sequential reference") {
  const ModelWeights w = load_model("synthetic:tiny-tied");
  BuildOptions b;
  b.context = 48;
  b.attn_chunks = 2;
  const Graph g = build_decode_graph(w, b);
  const std::vector<uint32_t> prompt = {9, 400, 17};
  auto ref = make_executor(g, w, {ExecutorKind::Sequential});
  auto ex = make_executor(g, w, vulkan_options());
  check_same(run_decode(*ex, g, prompt, 16), run_decode(*ref, g, prompt, 16));
}

TEST_CASE("vulkan: a small loop budget spreads the steps over many dispatches and changes nothing") {
  const TinyModel& m = tiny_model();
  VulkanExecutor ex(m.graph, m.weights, vulkan_options(2, {0, 2000}));
  check_same(run_decode(ex, m.graph, kPrompt, kNewTokens), tiny_reference());
  CHECK(ex.last_run_dispatches() > kNewTokens);
}

TEST_CASE("vulkan: the same md5 run after run, on one executor and on a new one") {
  const TinyModel& m = tiny_model();
  const std::string expect = token_md5(tiny_reference().tokens);
  auto ex = make_executor(m.graph, m.weights, vulkan_options());
  for (int run = 0; run < 3; ++run) CHECK(token_md5(decode(*ex, m.graph, kPrompt, kNewTokens, {}).tokens) == expect);
  auto fresh = make_executor(m.graph, m.weights, vulkan_options());
  CHECK(token_md5(decode(*fresh, m.graph, kPrompt, kNewTokens, {}).tokens) == expect);
}

TEST_CASE("vulkan: every position's logits match under teacher forcing") {
  const TinyModel& m = tiny_model();
  const std::vector<uint32_t> ids = spread_ids(m.graph.params.vocab);
  auto ref = make_executor(m.graph, m.weights, {ExecutorKind::Sequential});
  auto ex = make_executor(m.graph, m.weights, vulkan_options());
  check_same_rows(teacher_forced_logits(*ex, m.graph, ids), teacher_forced_logits(*ref, m.graph, ids));
}

TEST_CASE("vulkan: the trace holds one record per task and step, in order on each worker") {
  const TinyModel& m = tiny_model();
  auto ex = make_executor(m.graph, m.weights, vulkan_options(2));
  ex->set_tracing(true);
  decode(*ex, m.graph, kPrompt, 3, {});
  const uint32_t steps = uint32_t(kPrompt.size()) - 1 + 3;
  REQUIRE(ex->trace().size() == size_t(steps) * m.graph.tasks.size());
  std::set<std::pair<uint32_t, uint32_t>> seen;
  size_t with_sm = 0;  // records naming their SM: all on NVIDIA (the gl_SMIDNV module), else none
  uint64_t last = 0;
  for (const TaskTrace& t : ex->trace()) {
    CHECK(t.end_ns >= t.start_ns);
    CHECK(t.step < steps);
    CHECK(t.worker < 2);
    with_sm += t.sm != TaskTrace::kNoSm;
    last = std::max(last, t.end_ns);
    seen.emplace(t.step, t.task);
  }
  CHECK(seen.size() == ex->trace().size());
  CHECK((with_sm == 0 || with_sm == seen.size()));
  CHECK(last > 0);
}

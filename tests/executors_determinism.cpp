// Every executor, worker count and schedule must produce the sequential reference's tokens
// and logits bit for bit (docs/numerics.md).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "host/decode.h"
#include "host/graph_builder.h"
#include "tasks/gang.h"
#include "tests/executors_fixture.h"
#include "tests/hand_built_models.h"

using namespace spindle;

TEST_CASE("threaded executor matches the sequential reference for every worker count and schedule") {
  const TinyModel& m = tiny_model();
  const std::vector<uint32_t> prompt = {3, 141, 59, 26, 5};
  auto ref = make_executor(m.graph, m.weights, {ExecutorKind::Sequential});
  const DecodeResult expect = decode(*ref, m.graph, prompt, 12, {});
  const std::vector<float> expect_logits(ref->logits().begin(), ref->logits().end());
  REQUIRE(expect.tokens.size() == 12);

  for (ScheduleKind sched : {ScheduleKind::Ticket, ScheduleKind::Static})
    for (uint32_t workers : {1u, 2u, 3u, 8u}) {
      CAPTURE(schedule_kind_name(sched));
      CAPTURE(workers);
      auto ex = make_executor(m.graph, m.weights, {ExecutorKind::Threaded, workers, sched});
      const DecodeResult got = decode(*ex, m.graph, prompt, 12, {});
      CHECK(got.tokens == expect.tokens);
      CHECK(std::memcmp(ex->logits().data(), expect_logits.data(), expect_logits.size() * 4) == 0);
    }
}

TEST_CASE("with o_proj and down split, threaded matches the sequential reference") {
  const TinyModel& m = tiny_split_model();
  const std::vector<uint32_t> prompt = {3, 141, 59, 26, 5};
  const Decoded expect = run_decode(m.graph, m.weights, {ExecutorKind::Sequential}, prompt, 12);
  for (uint32_t workers : {1u, 3u, 8u}) {
    CAPTURE(workers);
    check_same(run_decode(m.graph, m.weights, {ExecutorKind::Threaded, workers, ScheduleKind::Ticket}, prompt, 12),
               expect);
  }
}

TEST_CASE("with the MLP as gangs or o_proj as pieces a kv head, sequential and threaded give the split's bits") {
  const TinyModel& split = tiny_split_model();
  const std::vector<uint32_t> prompt = {3, 141, 59, 26, 5};
  const Decoded expect = run_decode(split.graph, split.weights, {ExecutorKind::Sequential}, prompt, 12);
  for (const TinyModel* m : {&tiny_fused_mlp_model(), &tiny_head_pieces_model()}) {
    CAPTURE(m == &tiny_fused_mlp_model() ? "MLP gangs" : "o_proj pieces");
    check_same(run_decode(m->graph, m->weights, {ExecutorKind::Sequential}, prompt, 12), expect);
    check_threaded_gives(expect, m->graph, m->weights, prompt, 12);
  }
}

TEST_CASE("qwen3-0.6b: the two-hop split changes the last logits' bits, threaded, the MLP gangs and o_proj's pieces a kv head match it") {
  const ModelWeights w = load_model("synthetic:qwen3-0.6b");
  const Graph plain = qwen06b_graph(w, TwoHop::Plain), split = qwen06b_graph(w, TwoHop::Split);
  const std::vector<uint32_t> prompt = {9, 151000, 42};
  const Decoded a = run_decode(plain, w, {ExecutorKind::Sequential}, prompt, 3);
  const Decoded b = run_decode(split, w, {ExecutorKind::Sequential}, prompt, 3);
  REQUIRE(a.logits.size() == b.logits.size());
  CHECK(std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * 4) != 0);
  check_same(run_decode(split, w, {ExecutorKind::Threaded, 4, ScheduleKind::Ticket}, prompt, 3), b);
  for (TwoHop two_hop : {TwoHop::FusedMlp, TwoHop::HeadPieces})
    check_same(run_decode(qwen06b_graph(w, two_hop), w, {ExecutorKind::Threaded, 4, ScheduleKind::Ticket}, prompt, 3),
               b);
}

TEST_CASE("a model whose LM head sums exact products to f32 subnormals: its logits are that, and threaded matches") {
  // tiny_sums_model's claim, which the CUDA test of it relies on (docs/numerics.md).
  const ModelWeights w = spindle::test::tiny_sums_model();
  const Graph g = spindle::test::short_context_graph(w);
  const std::vector<uint32_t> prompt = {5, 17, 199};
  const Decoded expect = run_decode(g, w, {ExecutorKind::Sequential}, prompt, 10);
  const auto subnormal = [](float v) { return std::fpclassify(v) == FP_SUBNORMAL; };
  const auto tiny = [](float v) { return std::fabs(v) < std::ldexp(1.0f, -100); };
  CHECK(std::all_of(expect.logits.begin(), expect.logits.end(), tiny));
  CHECK(std::count_if(expect.logits.begin(), expect.logits.end(), subnormal) * 2 > ptrdiff_t(expect.logits.size()));
  check_same(run_decode(g, w, {ExecutorKind::Threaded, 3}, prompt, 10), expect);
}

TEST_CASE("sampled decoding is reproducible per seed and identical across executors") {
  const TinyModel& m = tiny_model();
  const std::vector<uint32_t> prompt = {7, 8, 9};
  SamplingOptions s;
  s.temperature = 0.8f;
  s.top_k = 40;
  s.top_p = 0.9f;
  s.seed = 1234;
  auto seq = make_executor(m.graph, m.weights, {ExecutorKind::Sequential});
  auto thr = make_executor(m.graph, m.weights, {ExecutorKind::Threaded, 3, ScheduleKind::Ticket});
  const auto a = decode(*seq, m.graph, prompt, 16, s).tokens;
  CHECK(decode(*thr, m.graph, prompt, 16, s).tokens == a);
  CHECK(decode(*seq, m.graph, prompt, 16, s).tokens == a);  // the same executor, run again
  s.seed = 99;
  CHECK(decode(*seq, m.graph, prompt, 16, s).tokens != a);
}

TEST_CASE("fp32 executors stay within rounding of the fp64 reference") {
  const TinyModel& m = tiny_model();
  const std::vector<uint32_t> ids = {1, 2, 3, 4, 5, 6, 7, 8};
  auto f32 = make_executor(m.graph, m.weights, {ExecutorKind::Sequential});
  auto f64 = make_executor(m.graph, m.weights, {ExecutorKind::SequentialF64});
  const auto a = teacher_forced_logits(*f32, m.graph, ids);
  const auto b = teacher_forced_logits(*f64, m.graph, ids);
  REQUIRE(a.size() == ids.size());
  double num = 0, den = 0;
  for (size_t t = 0; t < a.size(); ++t)
    for (size_t v = 0; v < a[t].size(); ++v) {
      num += (a[t][v] - b[t][v]) * (a[t][v] - b[t][v]);
      den += b[t][v] * b[t][v];
    }
  CHECK(den > 0);
  CHECK(std::sqrt(num / den) < 2e-2);  // bf16 activations: a few ulp of 2^-8 at most
}

TEST_CASE("teacher forcing reproduces the logits of a step-by-step decode") {
  const TinyModel& m = tiny_model();
  const std::vector<uint32_t> prompt = {11, 12, 13, 14};
  auto ex = make_executor(m.graph, m.weights, {ExecutorKind::Sequential});
  const DecodeResult r = decode(*ex, m.graph, prompt, 3, {});
  std::vector<uint32_t> ids = prompt;
  ids.insert(ids.end(), r.tokens.begin(), r.tokens.end() - 1);
  const auto rows = teacher_forced_logits(*ex, m.graph, ids);
  // The greedy choice after each prefix is the token decode produced there.
  for (size_t i = 0; i < r.tokens.size(); ++i) {
    const auto& row = rows[prompt.size() - 1 + i];
    const auto best = std::max_element(row.begin(), row.end()) - row.begin();
    CHECK(uint32_t(best) == r.tokens[i]);
  }
}

TEST_CASE("MoE with 37 experts, 5 a token: every worker count and schedule gives the sequential reference's bits") {
  const ModelWeights w = test::odd_experts_model();
  BuildOptions o;
  o.context = 32;
  const Graph g = build_decode_graph(w, o);
  const std::vector<uint32_t> prompt = {3, 141, 59};
  const Decoded expect = run_decode(g, w, {ExecutorKind::Sequential}, prompt, 8);
  for (ScheduleKind sched : {ScheduleKind::Ticket, ScheduleKind::Static})
    for (uint32_t workers : {1u, 3u}) {
      CAPTURE(schedule_kind_name(sched));
      CAPTURE(workers);
      check_same(run_decode(g, w, {ExecutorKind::Threaded, workers, sched}, prompt, 8), expect);
    }
}

TEST_CASE("tiny-moe: every worker count, schedule and tiling gives the sequential reference's bits") {
  const ModelWeights w = load_model("synthetic:tiny-moe");
  BuildOptions o;
  o.context = 64;
  o.attn_chunks = 3;
  const Graph g = build_decode_graph(w, o);
  const std::vector<uint32_t> prompt = {3, 141, 59, 26, 5};
  const Decoded expect = run_decode(g, w, {ExecutorKind::Sequential}, prompt, 12);
  for (ScheduleKind sched : {ScheduleKind::Ticket, ScheduleKind::Static})
    for (uint32_t workers : {1u, 2u, 3u, 8u}) {
      CAPTURE(schedule_kind_name(sched));
      CAPTURE(workers);
      check_same(run_decode(g, w, {ExecutorKind::Threaded, workers, sched}, prompt, 12), expect);
    }
  // Three rows a task: the router in three tasks (the last to arrive routes), expert tasks
  // across two slots' rows.
  o.rows_per_tile = 3;
  const Graph small_tiles = build_decode_graph(w, o);
  check_same(run_decode(small_tiles, w, {ExecutorKind::Sequential}, prompt, 12), expect);
  check_same(run_decode(small_tiles, w, {ExecutorKind::Threaded, 5, ScheduleKind::Ticket}, prompt, 12), expect);
}

TEST_CASE("tiny-qwen3.5: every worker count, schedule and tiling gives the sequential reference's bits") {
  const ModelWeights w = load_model("synthetic:tiny-qwen3.5");
  BuildOptions o;
  o.context = 64;
  o.attn_chunks = 3;
  const Graph g = build_decode_graph(w, o);
  const std::vector<uint32_t> prompt = {3, 141, 59, 26, 5};
  const Decoded expect = run_decode(g, w, {ExecutorKind::Sequential}, prompt, 12);
  for (ScheduleKind sched : {ScheduleKind::Ticket, ScheduleKind::Static})
    for (uint32_t workers : {1u, 2u, 3u, 8u}) {
      CAPTURE(schedule_kind_name(sched));
      CAPTURE(workers);
      check_same(run_decode(g, w, {ExecutorKind::Threaded, workers, sched}, prompt, 12), expect);
    }
  // A value head a task, and GDN input projections in tasks of 8 rows across their segments.
  o.rows_per_tile = 8;
  o.stage_tasks = 1000;
  const Graph small_tiles = build_decode_graph(w, o);
  check_same(run_decode(small_tiles, w, {ExecutorKind::Sequential}, prompt, 12), expect);
  check_same(run_decode(small_tiles, w, {ExecutorKind::Threaded, 5, ScheduleKind::Ticket}, prompt, 12), expect);
}

TEST_CASE("GDN gangs (a value head's state rows over 2 or 4 members) change no bit, on either CPU executor and schedule") {
  const ModelWeights w = load_model("synthetic:tiny-qwen3.5");
  BuildOptions o;
  o.context = 64;
  o.gdn_gang = 1;
  const std::vector<uint32_t> prompt = {3, 141, 59, 26, 5};
  const Decoded expect = run_decode(build_decode_graph(w, o), w, {ExecutorKind::Sequential}, prompt, 12);
  for (uint32_t members : {2u, 4u}) {
    CAPTURE(members);
    o.gdn_gang = members;
    const Graph g = build_decode_graph(w, o);
    size_t gdn = 0;
    for (const SpTask& t : g.tasks)
      if (t.op == SP_OP_GDN) {
        ++gdn;
        CHECK(sp_gang_width(t) == members);
        CHECK(t.tile_end - t.tile_begin == w.config.linear_value_head_dim / members);
      }
    CHECK(gdn == size_t(3) * w.config.linear_num_value_heads * members);  // tiny-qwen3.5: 3 GDN layers
    check_same(run_decode(g, w, {ExecutorKind::Sequential}, prompt, 12), expect);
    for (ScheduleKind sched : {ScheduleKind::Ticket, ScheduleKind::Static})
      check_same(run_decode(g, w, {ExecutorKind::Threaded, 3, sched}, prompt, 12), expect);
  }
}

TEST_CASE("a sequence starts from an empty recurrent state: a second decode repeats the first") {
  const ModelWeights w = load_model("synthetic:tiny-qwen3.5");
  BuildOptions o;
  o.context = 32;
  const Graph g = build_decode_graph(w, o);
  const std::vector<uint32_t> prompt = {3, 141, 59};
  for (ExecutorKind kind : {ExecutorKind::Sequential, ExecutorKind::Threaded}) {
    auto ex = make_executor(g, w, {kind});
    const DecodeResult first = decode(*ex, g, prompt, 8, {});
    const std::vector<float> logits(ex->logits().begin(), ex->logits().end());
    const DecodeResult second = decode(*ex, g, prompt, 8, {});
    CHECK(second.tokens == first.tokens);
    CHECK(std::memcmp(ex->logits().data(), logits.data(), logits.size() * 4) == 0);
  }
}

TEST_CASE("tiny-qwen3.5-moe and tiny-qwen3-next: every worker count and schedule gives the sequential reference's bits") {
  for (const char* preset : {"synthetic:tiny-qwen3.5-moe", "synthetic:tiny-qwen3-next"}) {
    CAPTURE(preset);
    const ModelWeights w = load_model(preset);
    BuildOptions o;
    o.context = 64;
    const Graph g = build_decode_graph(w, o);
    const std::vector<uint32_t> prompt = {3, 141, 59, 26, 5};
    check_threaded_gives(run_decode(g, w, {ExecutorKind::Sequential}, prompt, 12), g, w, prompt, 12);
  }
}

// The CUDA executor in every mode, schedule and worker count gives the sequential CPU
// reference's tokens and logits bit for bit (docs/numerics.md). Needs a GPU.
#include <doctest/doctest.h>

#include <cstring>
#include <set>
#include <utility>
#include <vector>

#include "host/decode.h"
#include "host/graph_builder.h"
#include "host/model_weights.h"
#include "megakernel/cuda_executor.h"
#include "tests/executors_fixture.h"

using namespace spindle;

namespace {

struct Decoded {
  std::vector<uint32_t> tokens;
  std::vector<float> logits;  // after the last step
};

Decoded run_decode(Executor& ex, const Graph& g, const std::vector<uint32_t>& prompt, uint32_t new_tokens) {
  Decoded d{decode(ex, g, prompt, new_tokens, {}).tokens, {}};
  d.logits.assign(ex.logits().begin(), ex.logits().end());
  return d;
}

Decoded run_decode(const Graph& g, const ModelWeights& w, const ExecutorOptions& opt,
                   const std::vector<uint32_t>& prompt, uint32_t new_tokens) {
  return run_decode(*make_executor(g, w, opt), g, prompt, new_tokens);
}

ExecutorOptions cuda_options(CudaMode mode, ScheduleKind schedule = ScheduleKind::Ticket, uint32_t workers = 0) {
  ExecutorOptions o;
  o.kind = ExecutorKind::Cuda;
  o.cuda_mode = mode;
  o.schedule = schedule;
  o.workers = workers;
  o.watchdog_ms = 10000;  // a hang fails in seconds
  return o;
}

void check_same(const Decoded& got, const Decoded& expect) {
  CHECK(got.tokens == expect.tokens);
  REQUIRE(got.logits.size() == expect.logits.size());
  CHECK(std::memcmp(got.logits.data(), expect.logits.data(), expect.logits.size() * sizeof(float)) == 0);
}

const std::vector<uint32_t> kPrompt = {3, 141, 59, 26, 5};
constexpr uint32_t kNewTokens = 12;

const Decoded& tiny_reference() {
  static const Decoded d = run_decode(tiny_model().graph, tiny_model().weights, {ExecutorKind::Sequential}, kPrompt, kNewTokens);
  return d;
}

// Every worker count under every tuning of the persistent kernel.
void check_megakernel(ScheduleKind schedule) {
  const TinyModel& m = tiny_model();
  REQUIRE(tiny_reference().tokens.size() == kNewTokens);
  for (const MegakernelTuning& tuning : {MegakernelTuning{}, MegakernelTuning{true, 0, 1},
                                          MegakernelTuning{false, 64 << 10, 1}, MegakernelTuning{false, 0, 2},
                                          MegakernelTuning{true, 64 << 10, 2}})
    for (uint32_t workers : {1u, 7u, 66u, 132u}) {
      CAPTURE(tuning.claim_ahead);
      CAPTURE(tuning.prefetch_bytes);
      CAPTURE(tuning.blocks_per_sm);
      CAPTURE(workers);
      CudaExecutor ex(m.graph, m.weights, cuda_options(CudaMode::Megakernel, schedule, workers), tuning);
      check_same(run_decode(ex, m.graph, kPrompt, kNewTokens), tiny_reference());
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
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < 40; ++i) ids.push_back((i * 37 + 11) % m.graph.params.vocab);
  auto ref = make_executor(m.graph, m.weights, {ExecutorKind::Sequential});
  const auto expect = teacher_forced_logits(*ref, m.graph, ids);
  for (CudaMode mode : {CudaMode::Megakernel, CudaMode::PerOp, CudaMode::Graph}) {
    CAPTURE(cuda_mode_name(mode));
    auto ex = make_executor(m.graph, m.weights, cuda_options(mode));
    const auto got = teacher_forced_logits(*ex, m.graph, ids);
    REQUIRE(got.size() == expect.size());
    for (size_t t = 0; t < got.size(); ++t) {
      CAPTURE(t);
      CHECK(std::memcmp(got[t].data(), expect[t].data(), got[t].size() * sizeof(float)) == 0);
    }
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

TEST_CASE("qwen3-0.6b shapes: every mode matches the sequential reference") {
  const ModelWeights w = load_model("synthetic:qwen3-0.6b");
  BuildOptions b;
  b.context = 128;
  b.attn_chunks = 4;
  const Graph g = build_decode_graph(w, b);
  const std::vector<uint32_t> prompt = {9, 151000, 42};
  const Decoded expect = run_decode(g, w, {ExecutorKind::Sequential}, prompt, 3);
  check_same(run_decode(g, w, cuda_options(CudaMode::Megakernel), prompt, 3), expect);
  check_same(run_decode(g, w, cuda_options(CudaMode::Megakernel, ScheduleKind::Static, 66), prompt, 3), expect);
  check_same(run_decode(g, w, cuda_options(CudaMode::PerOp), prompt, 3), expect);
  check_same(run_decode(g, w, cuda_options(CudaMode::Graph), prompt, 3), expect);
}

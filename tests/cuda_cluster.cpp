// The cluster program (megakernel/cluster_program.h, docs/two-hop-layer.md) gives the graph's
// bits: the sequential reference's, and the per-op mode's wherever a step's attention takes a
// different path (short chunks by warps, longer ones by the block, K and V staged in parts).
// Needs a GPU.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "host/decode.h"
#include "host/graph_builder.h"
#include "host/model_weights.h"
#include "megakernel/cuda_executor.h"
#include "tests/executors_fixture.h"

using namespace spindle;

namespace {

ExecutorOptions cuda_options(CudaMode mode, bool cluster, uint32_t workers = 0) {
  ExecutorOptions o;
  o.kind = ExecutorKind::Cuda;
  o.cuda_mode = mode;
  o.workers = workers;
  o.watchdog_ms = 10000;  // a hang fails in seconds
  o.megakernel.cluster_program = cluster;
  return o;
}

Decoded decode_from(Executor& ex, const Graph& g, const std::vector<uint32_t>& prompt, uint32_t new_tokens,
                    uint32_t start) {
  Decoded d{decode(ex, g, prompt, new_tokens, {}, start).tokens, {}};
  d.logits.assign(ex.logits().begin(), ex.logits().end());
  return d;
}

}  // namespace

TEST_CASE("qwen3-0.6b built for the cluster program: it gives the sequential reference's tokens and logits") {
  const Graph g = qwen06b_graph(qwen06b_weights(), TwoHop::Cluster);
  const std::vector<uint32_t> prompt = {9, 151000, 42};
  const Decoded expect = run_decode(g, qwen06b_weights(), {ExecutorKind::Sequential}, prompt, 3);
  for (uint32_t workers : {0u, 96u}) {  // every co-resident cluster, and the 12 it needs
    CAPTURE(workers);
    CudaExecutor ex(g, qwen06b_weights(), cuda_options(CudaMode::Megakernel, true, workers));
    CAPTURE(ex.describe());
    CHECK(ex.describe().find("cluster program") != std::string::npos);
    check_same(run_decode(ex, g, prompt, 3), expect);
  }
}

TEST_CASE("the cluster program matches the per-op mode at short, long and staged chunks, one launch or several") {
  const Graph g = qwen06b_graph(qwen06b_weights(), TwoHop::Cluster, 1024);
  const std::vector<uint32_t> prompt = {5, 77};
  for (uint32_t kv_kb : {0u, 4u})  // 4 KiB: K and V rows 8 positions at a time, scores twice
    for (uint32_t start : {0u, 20u, 130u, 700u}) {
      CAPTURE(kv_kb);
      CAPTURE(start);
      ExecutorOptions per_op = cuda_options(CudaMode::PerOp, false), cluster = cuda_options(CudaMode::Megakernel, true);
      for (ExecutorOptions* o : {&per_op, &cluster}) {
        o->megakernel.attn_kv_bytes = kv_kb << 10;
        o->megakernel.attn_score_bytes = kv_kb << 10;
      }
      cluster.steps_per_launch = 2;
      CudaExecutor expect_ex(g, qwen06b_weights(), per_op), got_ex(g, qwen06b_weights(), cluster);
      check_same(decode_from(got_ex, g, prompt, 3, start), decode_from(expect_ex, g, prompt, 3, start));
    }
}

TEST_CASE("the cluster program refuses a graph not built for it, too few clusters and a trace, saying why") {
  BuildOptions plain;
  plain.context = 128;
  const Graph g = build_decode_graph(qwen06b_weights(), plain);
  std::string msg = error_of([&] { CudaExecutor ex(g, qwen06b_weights(), cuda_options(CudaMode::Megakernel, true)); });
  CAPTURE(msg);
  CHECK(msg.find("cannot run as the cluster program") != std::string::npos);
  const Graph c = qwen06b_graph(qwen06b_weights(), TwoHop::Cluster);
  msg = error_of([&] { CudaExecutor ex(c, qwen06b_weights(), cuda_options(CudaMode::Megakernel, true, 64)); });
  CHECK(msg.find("needs 12 clusters of 8 blocks") != std::string::npos);
  CudaExecutor ex(c, qwen06b_weights(), cuda_options(CudaMode::Megakernel, true));
  ex.set_tracing(true);
  msg = error_of([&] { decode(ex, c, {1}, 1, {}); });
  CHECK(msg.find("records no per-task trace yet") != std::string::npos);
}

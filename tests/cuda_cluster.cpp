// The cluster program (megakernel/cluster_program.h, docs/two-hop-layer.md) gives the graph's
// bits: the sequential reference's, and the per-op mode's wherever a step's attention takes a
// different path (short chunks by warps, longer ones by the block, K and V staged in parts).
// Needs a GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "host/decode.h"
#include "host/graph_builder.h"
#include "host/model_weights.h"
#include "megakernel/cluster_kernel.h"
#include "megakernel/cuda_executor.h"
#include "ops/attention.h"
#include "tests/cuda_fixture.h"
#include "tests/executors_fixture.h"

using namespace spindle;

namespace {

// The cluster program (megakernel/cluster_program.h) on `workers` blocks, 0: every co-resident cluster.
ExecutorOptions cluster_options(uint32_t workers = 0) {
  ExecutorOptions o = cuda_options(CudaMode::Megakernel, ScheduleKind::Ticket, workers);
  o.megakernel.cluster_program = true;
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
  const std::vector<uint32_t> prompt = {9, 151000, 42};
  for (uint32_t pieces : {96u, 48u}) {  // MLP pieces of 32 and 64 columns: 4 and 8 lanes a down row
    CAPTURE(pieces);
    BuildOptions o = qwen06b_build(TwoHop::Cluster);
    o.fused_mlp = {pieces, 8};
    const Graph g = build_decode_graph(qwen06b_weights(), o);
    const Decoded expect = run_decode(g, qwen06b_weights(), {ExecutorKind::Sequential}, prompt, 3);
    for (uint32_t workers : {0u, std::max(8u, pieces / 8) * 8}) {  // every co-resident cluster, and as few as it needs
      CAPTURE(workers);
      CudaExecutor ex(g, qwen06b_weights(), cluster_options(workers));
      CAPTURE(ex.describe());
      CHECK(ex.describe().find("cluster program") != std::string::npos);
      check_same(run_decode(ex, g, prompt, 3), expect);
    }
  }
}

TEST_CASE("the cluster program matches the per-op mode at short, long and staged chunks, one launch or several") {
  const Graph g = qwen06b_graph(qwen06b_weights(), TwoHop::Cluster, 1024);
  const std::vector<uint32_t> prompt = {5, 77};
  for (uint32_t kv_kb : {0u, 4u})  // 4 KiB: K and V rows 8 positions at a time, scores twice
    for (uint32_t start : {0u, 20u, 130u, 700u}) {
      CAPTURE(kv_kb);
      CAPTURE(start);
      ExecutorOptions per_op = cuda_options(CudaMode::PerOp), cluster = cluster_options();
      for (ExecutorOptions* o : {&per_op, &cluster}) {
        o->megakernel.attn_kv_bytes = kv_kb << 10;
        o->megakernel.attn_score_bytes = kv_kb << 10;
      }
      cluster.steps_per_launch = 2;
      CudaExecutor expect_ex(g, qwen06b_weights(), per_op), got_ex(g, qwen06b_weights(), cluster);
      check_same(decode_from(got_ex, g, prompt, 3, start), decode_from(expect_ex, g, prompt, 3, start));
    }
}

TEST_CASE("a launch at short positions gives the front blocks' rings the attention area it does not use") {
  // At context 4096 a chunk is 512 positions, whose score block and 128 positions of K/V staging
  // (the default 64 KiB) leave a front block fewer slots than an MLP-only block has. A launch
  // whose positions all lie below 8 has chunks of one position (a score block of 16).
  const Graph g = qwen06b_graph(qwen06b_weights(), TwoHop::Cluster, 4096);
  const uint32_t chunk = chunk_size(g.params.context, 8), staged = (64u << 10) / (4 * g.params.head_dim);
  int device = 0, limit = 0;
  REQUIRE(cudaGetDevice(&device) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) == cudaSuccess);
  const cuda::ClusterSmem graph = cuda::cluster_kernel_smem(g.params, chunk, staged, size_t(limit));
  const cuda::ClusterSmem short_launch = cuda::cluster_ring_slots(g.params, 16, 1, graph.bytes);
  CHECK(graph.ring_slots < graph.mlp_ring_slots);
  CHECK(short_launch.ring_slots > graph.ring_slots);
  CHECK(short_launch.ring_slots <= graph.mlp_ring_slots);  // attention still takes more than the MLP-only layout
  CHECK(short_launch.mlp_ring_slots == graph.mlp_ring_slots);
  CHECK(cuda::cluster_ring_slots(g.params, chunk, staged, graph.bytes).ring_slots == graph.ring_slots);
  CudaExecutor ex(g, qwen06b_weights(), cluster_options());
  CHECK(ex.describe().find("weight ring of " + std::to_string(graph.ring_slots) + "-" +
                           std::to_string(short_launch.ring_slots) + " x 16 KiB") != std::string::npos);
}

TEST_CASE("the cluster program refuses a graph not built for it, too few clusters and too small a ring, saying why") {
  BuildOptions plain;
  plain.context = 128;
  const Graph g = build_decode_graph(qwen06b_weights(), plain);
  std::string msg = error_of([&] { CudaExecutor ex(g, qwen06b_weights(), cluster_options()); });
  CAPTURE(msg);
  CHECK(msg.find("cannot run as the cluster program") != std::string::npos);
  const Graph c = qwen06b_graph(qwen06b_weights(), TwoHop::Cluster);
  msg = error_of([&] { CudaExecutor ex(c, qwen06b_weights(), cluster_options(64)); });
  CHECK(msg.find("needs 12 clusters of 8 blocks") != std::string::npos);
  // 200 KiB of K and V staging (chunks of 512 positions at context 4096) leave the ring no room.
  const Graph long_context = qwen06b_graph(qwen06b_weights(), TwoHop::Cluster, 4096);
  ExecutorOptions o = cluster_options();
  o.megakernel.attn_kv_bytes = 200u << 10;
  msg = error_of([&] { CudaExecutor ex(long_context, qwen06b_weights(), o); });
  CAPTURE(msg);
  CHECK(msg.find("weight ring needs 4 slots of 16 KiB") != std::string::npos);
  CHECK(msg.find("--tune cuda-attn-kv-kb") != std::string::npos);
}

// Per step: a front block's q/k/v, attention and o_proj records a layer, an MLP member's record
// a layer, every block's LM head rows and block 0's sample.
TEST_CASE("the cluster program's trace: each block's phases as the graph tasks whose work they do, in time order") {
  const Graph g = qwen06b_graph(qwen06b_weights(), TwoHop::Cluster);
  const std::vector<uint32_t> prompt = {9, 151000, 42};
  CudaExecutor ex(g, qwen06b_weights(), cluster_options());
  ex.set_tracing(true);
  CudaExecutor untraced(g, qwen06b_weights(), cluster_options());
  check_same(run_decode(ex, g, prompt, 2), run_decode(untraced, g, prompt, 2));
  const uint32_t steps = 4, L = g.params.n_layers, blocks = ex.workers(), front = 8 * 8, mlp = 12 * 8;
  std::map<std::pair<uint32_t, std::string>, uint32_t> runs;  // (step, op) → records
  std::map<uint32_t, std::vector<const TaskTrace*>> by_block;
  for (const TaskTrace& t : ex.trace()) {
    const SpTask& task = g.tasks[t.task];
    const bool lm_head = task.op == SP_OP_GEMV && task.layer >= L;
    ++runs[{t.step, lm_head ? "lm_head" : sp_opcode_name(task.op)}];
    CHECK(t.start_ns <= t.end_ns);
    CHECK(t.worker < blocks);
    by_block[t.worker].push_back(&t);
  }
  for (uint32_t s = 0; s < steps; ++s) {
    CAPTURE(s);
    CHECK(runs[{s, "gemv"}] == front * L);
    CHECK(runs[{s, "attention"}] == front * L);
    CHECK(runs[{s, "gemv_piece"}] == front * L);
    CHECK(runs[{s, "mlp"}] == mlp * L);
    CHECK(runs[{s, "lm_head"}] == blocks);
    CHECK(runs[{s, "sample"}] == 1);
  }
  CHECK(by_block.size() == blocks);
  for (auto& [block, records] : by_block) {
    std::sort(records.begin(), records.end(), [](const TaskTrace* a, const TaskTrace* b) { return a->start_ns < b->start_ns; });
    for (size_t i = 1; i < records.size(); ++i) {
      CAPTURE(block);
      CHECK(records[i - 1]->end_ns <= records[i]->start_ns);
      const uint64_t since = records[i]->start_ns - records[i]->wait_ns;  // a run's first: since its launch
      if (records[i]->step == records[i - 1]->step) CHECK(since == records[i - 1]->end_ns);
      else CHECK(since >= records[i - 1]->end_ns);
    }
  }
}

// The second step fails at its start, when the blocks' weight rings already hold its first
// chunks in flight: the blocks must let them land before they leave.
TEST_CASE("the cluster program stops at a bad token or position with the error naming it, weight copies in flight") {
  const Graph g = qwen06b_graph(qwen06b_weights(), TwoHop::Cluster);
  {
    CudaExecutor ex(g, qwen06b_weights(), cluster_options());
    ex.state().token = g.params.vocab + 5;
    const std::string msg = error_of([&] { ex.run_steps(1); });
    CAPTURE(msg);
    CHECK(msg.find("(embed)") != std::string::npos);
    CHECK(msg.find("token " + std::to_string(g.params.vocab + 5)) != std::string::npos);
  }
  {
    CudaExecutor ex(g, qwen06b_weights(), cluster_options());
    ex.state().position = g.params.context - 1;
    const std::string msg = error_of([&] { ex.run_steps(2); });
    CAPTURE(msg);
    CHECK(msg.find("(attention)") != std::string::npos);
    CHECK(msg.find("position " + std::to_string(g.params.context) + " is past the KV capacity") != std::string::npos);
  }
  const std::vector<uint32_t> prompt = {9, 151000, 42};
  CudaExecutor fresh(g, qwen06b_weights(), cluster_options());
  check_same(run_decode(fresh, g, prompt, 2), run_decode(g, qwen06b_weights(), {ExecutorKind::Sequential}, prompt, 2));
}

// The CUDA executor fails loudly and recoverably: a graph that can never finish trips the
// watchdog, a bad operand becomes an error naming the task, running out of memory names the
// bytes and the arena, and what the device tiles do not implement is refused. Needs a GPU.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "host/decode.h"
#include "host/graph_builder.h"
#include "host/model_weights.h"
#include "megakernel/cuda_executor.h"
#include "megakernel/megakernel.h"
#include "megakernel/task_smem.h"
#include "tasks/error.h"
#include "tests/cuda_fixture.h"
#include "tests/executors_fixture.h"
#include "tests/hand_built_models.h"

using namespace spindle;

namespace {

std::vector<uint32_t> greedy_tokens(ExecutorKind kind) {
  const TinyModel& m = tiny_model();
  ExecutorOptions o = cuda_options(CudaMode::Megakernel);
  o.kind = kind;
  auto ex = make_executor(m.graph, m.weights, o);
  return decode(*ex, m.graph, {1, 2, 3}, 6, {}).tokens;
}

}  // namespace

TEST_CASE("a graph that never finishes trips the watchdog, and a new executor still runs") {
  ExecutorOptions o = cuda_options(CudaMode::Megakernel);
  o.watchdog_ms = 300;
  check_watchdog_trips(o, "earlier device failure");

  CHECK(greedy_tokens(ExecutorKind::Cuda) == greedy_tokens(ExecutorKind::Sequential));
}

TEST_CASE("a projection task never given its input trips the watchdog with its copy in flight, either schedule") {
  const TinyModel& m = tiny_model();
  Graph broken = m.graph;
  const uint32_t task =
      first_task(broken, SP_OP_GEMV, [](const SpTask& t) { return t.wait_counter != SP_NO_COUNTER; });
  broken.tasks[task].wait_count += 1;
  // Under either schedule a block that gives up waiting must let its copy land before it
  // leaves; the static lists' blocks are all resident and reach the abort at other points.
  for (const ScheduleKind schedule : {ScheduleKind::Ticket, ScheduleKind::Static}) {
    CAPTURE(schedule_kind_name(schedule));
    ExecutorOptions o = cuda_options(CudaMode::Megakernel);
    o.schedule = schedule;
    o.watchdog_ms = 300;
    REQUIRE(o.megakernel.weight_preload_bytes >= 1024);  // tiny's projection tasks are preloaded
    auto ex = make_executor(broken, m.weights, o);
    const std::string msg = error_of([&] { decode(*ex, broken, {1}, 1, {}); });
    CAPTURE(msg);
    CHECK(msg.find("watchdog") != std::string::npos);
    CHECK(msg.find("task " + std::to_string(task) + " (") != std::string::npos);
  }
  CHECK(greedy_tokens(ExecutorKind::Cuda) == greedy_tokens(ExecutorKind::Sequential));  // still usable
}

// Rank 1 of layer 0's first MLP gang taken out, and every task after its stage left waiting on
// nothing (they compute garbage): the blocks held at the gang's barrier keep the tasks they
// claimed next, so a task waiting on those could time out first; now only the barrier can.
TEST_CASE("tiny: a gang with a missing member trips the watchdog at the gang's barrier, either schedule") {
  const TinyModel& m = tiny_fused_mlp_model();
  Graph broken = m.graph;
  const uint32_t first = first_task(broken, SP_OP_MLP);
  REQUIRE(broken.tasks[first].gang_width == 4);
  broken.tasks.erase(broken.tasks.begin() + first + 1);
  for (size_t i = first + 15; i < broken.tasks.size(); ++i) broken.tasks[i].wait_counter = SP_NO_COUNTER;
  for (const ScheduleKind schedule : {ScheduleKind::Ticket, ScheduleKind::Static}) {
    CAPTURE(schedule_kind_name(schedule));
    ExecutorOptions o = cuda_options(CudaMode::Megakernel);
    o.schedule = schedule;
    o.watchdog_ms = 300;
    auto ex = make_executor(broken, m.weights, o);
    const std::string msg = error_of([&] { decode(*ex, broken, {1}, 1, {}); });
    CAPTURE(msg);
    CHECK(msg.find("watchdog") != std::string::npos);
    CHECK(msg.find("(mlp) of step 0, rank ") != std::string::npos);
    CHECK(msg.find("of a gang of 4") != std::string::npos);
    CHECK(msg.find("at its gang's barrier") != std::string::npos);
    CHECK(msg.find("needs 4") != std::string::npos);
  }
  CHECK(greedy_tokens(ExecutorKind::Cuda) == greedy_tokens(ExecutorKind::Sequential));  // still usable
}

TEST_CASE("tiny: a token outside the vocabulary is an error naming the embedding task") {
  const TinyModel& m = tiny_model();
  auto ex = make_executor(m.graph, m.weights, cuda_options(CudaMode::Megakernel));
  ex->state().token = m.graph.params.vocab + 5;
  const std::string msg = error_of([&] { ex->run_steps(1); });
  CAPTURE(msg);
  CHECK(msg.find("(embed)") != std::string::npos);
  CHECK(msg.find("token " + std::to_string(m.graph.params.vocab + 5)) != std::string::npos);
}

TEST_CASE("tiny: a position past the KV capacity is an error naming an attention task, in every mode") {
  const TinyModel& m = tiny_model();
  for (CudaMode mode : {CudaMode::Megakernel, CudaMode::PerOp}) {
    CAPTURE(cuda_mode_name(mode));
    ExecutorOptions o = cuda_options(CudaMode::Megakernel);
    o.cuda_mode = mode;
    auto ex = make_executor(m.graph, m.weights, o);
    ex->state().position = m.graph.params.context;
    const std::string msg = error_of([&] { ex->run_steps(1); });
    CAPTURE(msg);
    CHECK(msg.find("(attention)") != std::string::npos);
    CHECK(msg.find("position " + std::to_string(m.graph.params.context) + " is past the KV capacity") !=
          std::string::npos);
  }
}

// The device tiles check the routing before reading any expert's rows, as the CPU's do.
TEST_CASE("tiny-moe: a routing slot naming no expert is an error naming the slot, in every mode") {
  const ModelWeights w = load_model("synthetic:tiny-moe");
  BuildOptions o;
  o.context = 64;
  Graph g = build_decode_graph(w, o);
  // The first routed down task reads the forced tokens as its routing: slot 1 is the prompt's
  // {59, 26}, expert 59 of 8.
  g.tasks[first_task(g, SP_OP_EXPERT_DOWN)].operand[2] = g.io.forced_tokens;
  const std::vector<uint32_t> prompt = {3, 141, 59, 26, 5};
  const std::string names = "routing slot 1 names expert 59, not one of the 8";
  const std::string cpu = error_of([&] { run_decode(g, w, {ExecutorKind::Sequential}, prompt, 2); });
  CAPTURE(cpu);
  CHECK(cpu.find(names) != std::string::npos);
  for (CudaMode mode : {CudaMode::Megakernel, CudaMode::PerOp, CudaMode::Graph}) {
    CAPTURE(cuda_mode_name(mode));
    const std::string msg = error_of([&] { run_decode(g, w, cuda_options(mode), prompt, 2); });
    CAPTURE(msg);
    CHECK(msg.find("(expert_down)") != std::string::npos);
    CHECK(msg.find(names) != std::string::npos);
  }
}

TEST_CASE("tiny: sampling with a temperature is refused, not approximated") {
  const TinyModel& m = tiny_model();
  auto ex = make_executor(m.graph, m.weights, cuda_options(CudaMode::Megakernel));
  SamplingOptions s;
  s.temperature = 0.8f;
  CHECK(error_of([&] { decode(*ex, m.graph, {1, 2}, 4, s); }) ==
        "cuda executor: only greedy sampling (temperature 0) is implemented");
}

TEST_CASE("GDN heads larger than the tile holds are refused in every mode, naming the task and the sizes") {
  ModelConfig c = synthetic_config("tiny-qwen3.5");
  c.linear_key_head_dim = 512;
  const ModelWeights w = test::weights_for("wide GDN heads", c, sizeof(bf16));
  BuildOptions o;
  o.context = 16;
  const Graph g = build_decode_graph(w, o);
  for (CudaMode mode : {CudaMode::Megakernel, CudaMode::PerOp, CudaMode::Graph}) {
    const std::string error = error_of([&] { make_executor(g, w, cuda_options(mode)); });
    CHECK(error.find("(gdn): key and value heads of 512 and 16 elements; the tile takes at most 256") !=
          std::string::npos);
  }
}

TEST_CASE("running out of device memory names the bytes and the arena") {
  const TinyModel& m = tiny_model();
  Graph huge = m.graph;
  const uint64_t bytes = uint64_t(1) << 50;  // a petabyte of KV cache
  huge.arenas[SP_ARENA_KV].bytes = bytes;
  const std::string msg = error_of([&] { make_executor(huge, m.weights, cuda_options(CudaMode::Megakernel)); });
  CAPTURE(msg);
  CHECK(msg.find("out of device memory") != std::string::npos);
  CHECK(msg.find("arena 'kv'") != std::string::npos);
  CHECK(msg.find(std::to_string(bytes) + " bytes") != std::string::npos);
  CHECK(greedy_tokens(ExecutorKind::Cuda) == greedy_tokens(ExecutorKind::Sequential));  // still usable
}

TEST_CASE("two blocks an SM whose shared memory does not fit twice are refused, naming the knobs") {
  // qwen3-0.6b at context 4161 stages 160 KB of K and V rows an attention task, and copies 128
  // KB of GATE_UP rows; with 32 KB and 64 KB two blocks fit.
  const ModelWeights w = load_model("synthetic:qwen3-0.6b");
  BuildOptions b;
  b.context = 4161;
  const Graph g = build_decode_graph(w, b);
  ExecutorOptions o = cuda_options(CudaMode::Megakernel);
  o.megakernel.blocks_per_sm = 2;
  const std::string msg = error_of([&] { CudaExecutor ex(g, w, o); });
  CAPTURE(msg);
  CHECK(msg.find("2 blocks do not fit on an SM") != std::string::npos);
  CHECK(msg.find("--tune cuda-attn-kv-kb") != std::string::npos);
  CHECK(msg.find("cuda-preload-kb") != std::string::npos);
  o.megakernel.attn_kv_bytes = 32u << 10;
  o.megakernel.weight_preload_bytes = 64u << 10;
  const CudaExecutor two(g, w, o);
  o.megakernel.blocks_per_sm = 1;
  const CudaExecutor one(g, w, o);
  CHECK(two.workers() == 2 * one.workers());
}

// qwen3-0.6b at context 16384 in one attention chunk a kv head: its attention tile's shared
// memory grows by 4 * head_dim bytes a position cuda-attn-kv-kb stages.
TEST_CASE("a largest tile beyond a block's shared memory is refused, naming the knobs, the megakernel's beside its own") {
  const ModelWeights w = load_model("synthetic:qwen3-0.6b");
  BuildOptions b;
  b.context = 16384;
  b.attn_chunks = 1;
  const Graph g = build_decode_graph(w, b);
  const SpGraphParams& p = g.params;
  const SpTask* attention = nullptr;
  for (const SpTask& t : g.tasks)
    if (t.op == SP_OP_ATTENTION) attention = &t;
  REQUIRE(attention);
  const uint32_t scores = (32u << 10) / (4 * (p.n_heads / p.n_kv_heads / p.attn_q_splits));  // the default's
  const auto attention_bytes = [&](uint32_t kv) { return uint32_t(cuda::task_smem_bytes(g, *attention, scores, kv)); };
  int limit = 0;
  REQUIRE(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0) == cudaSuccess);
  const uint32_t own = uint32_t(cuda::megakernel_static_smem(1, cuda::TileBuild::kPlain));
  uint32_t kv = 1;
  while (attention_bytes(kv) <= uint32_t(limit) - own) ++kv;
  REQUIRE(attention_bytes(kv) <= uint32_t(limit));  // within a block's, not beside the kernel's
  ExecutorOptions o = cuda_options(CudaMode::Megakernel);
  o.megakernel.attn_kv_bytes = kv * 4 * p.head_dim;
  std::string msg = error_of([&] { CudaExecutor ex(g, w, o); });
  CAPTURE(msg);
  CHECK(msg.find("beside the persistent kernel's " + std::to_string(own)) != std::string::npos);
  CHECK(msg.find("--tune cuda-attn-kv-kb") != std::string::npos);
  o.megakernel.attn_kv_bytes = (kv + 64) * 4 * p.head_dim;  // past a block's in every mode
  for (CudaMode mode : {CudaMode::Megakernel, CudaMode::PerOp}) {
    o.cuda_mode = mode;
    msg = error_of([&] { CudaExecutor ex(g, w, o); });
    CHECK(msg.find("largest tile needs " + std::to_string(attention_bytes(kv + 64))) != std::string::npos);
    CHECK(msg.find("--tune cuda-attn-kv-kb") != std::string::npos);
  }
}

TEST_CASE("the copy bandwidth probe gives a plausible number") {
  const double gbs = measure_copy_bandwidth_gbs(size_t(256) << 20);
  MESSAGE("device-to-device copy of 256 MiB: " << gbs << " GB/s");
  CHECK(gbs > 50);
  CHECK(gbs < 20000);
}

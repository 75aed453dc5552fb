// The Vulkan executor fails loudly: a graph that can never finish ends with a watchdog error
// naming the waiting task, bad operands and unsupported settings become errors naming the
// task or the setting, and a dispatch that ran past lavapipe's loop limit is caught.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "host/decode.h"
#include "host/vulkan_devices.h"
#include "host/vulkan_executor.h"
#include "tasks/error.h"
#include "tests/executors_fixture.h"
#include "tests/hand_built_models.h"
#include "tests/vulkan_fixture.h"

using namespace spindle;

namespace {

std::vector<uint32_t> greedy_tokens(ExecutorKind kind) {
  const TinyModel& m = tiny_model();
  ExecutorOptions o = vulkan_options(2);
  o.kind = kind;
  auto ex = make_executor(m.graph, m.weights, o);
  return decode(*ex, m.graph, {1, 2, 3}, 6, {}).tokens;
}

}  // namespace

TEST_CASE("vulkan: devices are listed, and one that does not exist is refused by name") {
  const std::vector<VulkanDeviceInfo> devices = list_vulkan_devices();
  REQUIRE(!devices.empty());
  for (const VulkanDeviceInfo& d : devices) MESSAGE(d.index << ": " << d.name << " (" << d.type << ", " << d.driver << ")");
  const TinyModel& m = tiny_model();
  ExecutorOptions o = vulkan_options(2);
  o.device = 99;
  CHECK(error_of([&] { make_executor(m.graph, m.weights, o); }).find("there is no device 99") != std::string::npos);
}

TEST_CASE("vulkan: a device index below -1 is refused, not taken as the best one") {
  const TinyModel& m = tiny_model();
  ExecutorOptions o = vulkan_options(2);
  o.device = -5;
  CHECK(error_of([&] { make_executor(m.graph, m.weights, o); }).find("there is no device -5") != std::string::npos);
}

TEST_CASE("vulkan: more workers than a dispatch's workgroups is refused up front, naming --workers and the limit") {
  const TinyModel& m = tiny_model();
  for (const uint32_t workers : {100000000u, VulkanExecutor::kMaxWorkers + 1}) {
    const std::string msg = error_of([&] { make_executor(m.graph, m.weights, vulkan_options(workers)); });
    CAPTURE(msg);
    CHECK(msg.find("vulkan executor: --workers " + std::to_string(workers) + " is more than ") != std::string::npos);
    // the device's limit where it is the lower (lavapipe's is 65535), else the executor's
    CHECK((msg.find("allows in a dispatch (maxComputeWorkGroupCount[0])") != std::string::npos ||
           msg.find("65535, the most the executor takes") != std::string::npos));
  }
  VulkanTuning wrapping;  // 32 invocations a warp: 2^32 + 32 of them
  wrapping.warps = (1u << 27) + 1;
  const std::string warps = error_of([&] { make_executor(m.graph, m.weights, vulkan_options(1, wrapping)); });
  CHECK(warps.find("134217729 warps of 32 exceed the device's workgroup size") != std::string::npos);
}

TEST_CASE("vulkan: a graph that never finishes trips the watchdog, and a new executor still runs") {
  check_watchdog_trips(vulkan_options(2, 300), "earlier failure");

  CHECK(greedy_tokens(ExecutorKind::Vulkan) == greedy_tokens(ExecutorKind::Sequential));
}

TEST_CASE("vulkan: a token outside the vocabulary or a position past the cache is an error naming the task") {
  const TinyModel& m = tiny_model();
  auto ex = make_executor(m.graph, m.weights, vulkan_options(2));
  ex->state().token = m.graph.params.vocab + 5;
  const std::string token = error_of([&] { ex->run_steps(1); });
  CAPTURE(token);
  CHECK(token.find("(embed)") != std::string::npos);
  CHECK(token.find("token " + std::to_string(m.graph.params.vocab + 5)) != std::string::npos);

  auto past = make_executor(m.graph, m.weights, vulkan_options(2));
  past->state().position = m.graph.params.context;
  const std::string position = error_of([&] { past->run_steps(1); });
  CAPTURE(position);
  CHECK(position.find("(attention)") != std::string::npos);
  CHECK(position.find("past the KV capacity of " + std::to_string(m.graph.params.context)) != std::string::npos);
}

// The expert tiles check the routing before reading any expert's rows, as the CPU's do.
TEST_CASE("vulkan: a routing slot naming no expert is an error naming the task and the slot") {
  const ModelWeights w = load_model("synthetic:tiny-moe");
  BuildOptions o;
  o.context = 64;
  Graph g = build_decode_graph(w, o);
  // The first routed down task reads the forced tokens as its routing: slot 1 is the prompt's
  // {59, 26}, expert 59 of 8.
  g.tasks[first_task(g, SP_OP_EXPERT_DOWN)].operand[2] = g.io.forced_tokens;
  const std::vector<uint32_t> prompt = {3, 141, 59, 26, 5};
  const std::string names = "routing slot 1 names expert 59, not one of the 8";
  CHECK(error_of([&] { run_decode(g, w, {ExecutorKind::Sequential}, prompt, 2); }).find(names) != std::string::npos);
  auto ex = make_executor(g, w, vulkan_options(2));
  const std::string msg = error_of([&] { run_decode(*ex, g, prompt, 2); });
  CAPTURE(msg);
  CHECK(msg.find("vulkan executor: task " + std::to_string(first_task(g, SP_OP_EXPERT_DOWN)) +
                 " (expert_down) of step 0: " + names) == 0);
  CHECK(error_of([&] { ex->run_steps(1); }).find("earlier failure") != std::string::npos);
}

TEST_CASE("vulkan: sampling with a temperature and static schedules are refused, not approximated") {
  const TinyModel& m = tiny_model();
  auto ex = make_executor(m.graph, m.weights, vulkan_options(2));
  SamplingOptions s;
  s.temperature = 0.8f;
  CHECK(error_of([&] { decode(*ex, m.graph, {1, 2}, 4, s); }) ==
        "vulkan executor: only greedy sampling (temperature 0) is implemented");
  ExecutorOptions o = vulkan_options(2);
  o.schedule = ScheduleKind::Static;
  CHECK(error_of([&] { make_executor(m.graph, m.weights, o); }).find("by ticket only") != std::string::npos);
}

// A lane holds one run of 8 elements of a GDN state row, so a key head of more than 256 is
// refused before anything runs, as CUDA's tile refuses it.
TEST_CASE("vulkan: GDN key heads larger than the shader holds are refused, naming the task and the limit") {
  ModelConfig c = synthetic_config("tiny-qwen3.5");
  c.linear_key_head_dim = 512;
  const ModelWeights w = test::weights_for("wide GDN heads", c, sizeof(bf16));
  BuildOptions o;
  o.context = 16;
  const Graph g = build_decode_graph(w, o);
  const std::string error = error_of([&] { make_executor(g, w, vulkan_options(2)); });
  CAPTURE(error);
  CHECK(error.find("vulkan executor: task " + std::to_string(first_task(g, SP_OP_GDN)) +
                   " (gdn): key heads of 512 elements; the shader takes at most 256") == 0);
}

TEST_CASE("vulkan: on lavapipe, a budget past the loop limit is caught rather than giving wrong tokens") {
  if (!on_lavapipe()) return;  // other drivers have no such limit
  const TinyModel& m = tiny_model();
  // One workgroup never waits, so nothing but the budget ends its dispatch.
  VulkanExecutor ex(m.graph, m.weights, vulkan_options(1, {0, 1u << 24}));
  const std::string msg = error_of([&] { decode(ex, m.graph, {1, 2, 3}, 40, {}); });
  CAPTURE(msg);
  CHECK(msg.find("loop limit") != std::string::npos);
}

TEST_CASE("vulkan: a shuffle width that is not a power of two up to the subgroup size is refused") {
  const TinyModel& m = tiny_model();
  for (uint32_t width : {3u, 64u}) {
    CAPTURE(width);
    const std::string msg = error_of([&] { VulkanExecutor(m.graph, m.weights, vulkan_options(1, {0, 0, width})); });
    CAPTURE(msg);
    CHECK(msg.find("a shuffle width of " + std::to_string(width) + " is not a power of two") != std::string::npos);
  }
}

TEST_CASE("vulkan: an unroll depth the shaders do not take is refused, naming the ones they do") {
  const TinyModel& m = tiny_model();
  for (uint32_t depth : {3u, 16u}) {  // 0 asks for the default
    CAPTURE(depth);
    ExecutorOptions o = vulkan_options(1);
    o.vulkan.dot_unroll = depth;
    CHECK(error_of([&] { VulkanExecutor(m.graph, m.weights, o); }) ==
          "vulkan executor: a dot unroll of " + std::to_string(depth) + " is not one the shaders take (1, 2, 4, 8)");
    o.vulkan.dot_unroll = 4;
    o.vulkan.attn_unroll = depth;
    CHECK(error_of([&] { VulkanExecutor(m.graph, m.weights, o); }) == "vulkan executor: an attention unroll of " +
                                                                          std::to_string(depth) +
                                                                          " is not one the shaders take (1, 2, 4, 8)");
  }
}

TEST_CASE("vulkan: the pipeline's statistics are read where the driver reports them, and nothing fails where not") {
  const TinyModel& m = tiny_model();
  VulkanExecutor ex(m.graph, m.weights, vulkan_options(1));
  const std::vector<PipelineStatistic> stats = ex.pipeline_statistics();
  MESSAGE(ex.describe() << ": " << stats.size() << " pipeline statistics");
  for (const PipelineStatistic& s : stats) {
    MESSAGE(s.executable << ": " << s.name << " = " << s.value);
    CHECK(!s.name.empty());
    CHECK(!s.value.empty());
  }
}

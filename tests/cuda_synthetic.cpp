// Synthetic weights generated on the device: the same bytes as the host's, whole arenas
// compared, and decoding on them gives the CPU's tokens and logits. Needs a GPU.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "host/decode.h"
#include "host/gates.h"
#include "host/graph_builder.h"
#include "host/model_weights.h"
#include "host/synthetic.h"
#include "megakernel/cuda_executor.h"
#include "megakernel/device_buffer.h"
#include "megakernel/device_model.h"
#include "tasks/error.h"

using namespace spindle;

namespace {

std::vector<uint8_t> read_back(const uint8_t* device, uint64_t bytes) {
  std::vector<uint8_t> host(bytes);
  REQUIRE(cudaMemcpy(host.data(), device, bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
  return host;
}

// The first differing byte, or -1.
int64_t first_difference(const std::vector<uint8_t>& a, const uint8_t* b) {
  if (std::memcmp(a.data(), b, a.size()) == 0) return -1;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return int64_t(i);
  return -1;
}

// Generates the preset's arena on the device (over a buffer first filled with 0xAB, so an
// unwritten byte shows) and compares it whole with the host-filled one.
void check_device_arena(const std::string& preset, uint64_t seed) {
  CAPTURE(preset);
  CAPTURE(seed);
  const SyntheticPlan plan = synthetic_plan(preset, seed);
  const ModelWeights host = make_synthetic(preset, seed);
  REQUIRE(host.arenas[0].bytes == plan.arena_bytes);
  cuda::DeviceBuffer arena(plan.arena_bytes, "the test arena");
  REQUIRE(cudaMemset(arena.data(), 0xAB, arena.bytes()) == cudaSuccess);
  cuda::generate_synthetic(plan, arena.data());
  CHECK(first_difference(read_back(arena.data(), arena.bytes()), host.arenas[0].data) == -1);
}

struct Decoded {
  std::vector<uint32_t> tokens;
  std::vector<float> logits;
};

Decoded run_decode(const Graph& g, const ModelWeights& w, ExecutorKind kind, const std::vector<uint32_t>& prompt,
                   uint32_t n) {
  ExecutorOptions opt;
  opt.kind = kind;
  opt.watchdog_ms = 10000;
  auto ex = make_executor(g, w, opt);
  Decoded d{decode(*ex, g, prompt, n, {}).tokens, {}};
  d.logits.assign(ex->logits().begin(), ex->logits().end());
  return d;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("synthetic on the device: the arena is the host's byte for byte") {
  check_device_arena("tiny", 0);
  check_device_arena("tiny", 12345);
  check_device_arena("tiny-tied", 1);
  check_device_arena("qwen3-0.6b", 0);
}

TEST_CASE("synthetic on the device: the executor's weight arena, from unfilled weights, is the host's") {
  for (const char* preset : {"tiny", "qwen3-0.6b"}) {
    CAPTURE(preset);
    const std::string spec = std::string("synthetic:") + preset + "@4";
    const ModelWeights unfilled = load_model(spec, LoadOptions{.fill_host = false});
    REQUIRE_FALSE(unfilled.in_host_memory());
    BuildOptions b;
    b.context = 16;
    const Graph g = build_decode_graph(unfilled, b);
    const cuda::DeviceModel model(g, unfilled);
    const ModelWeights host = load_model(spec);
    const std::vector<uint8_t> device = read_back(model.arena(SP_ARENA_WEIGHTS0), host.arenas[0].bytes);
    CHECK(first_difference(device, host.arenas[0].data) == -1);
  }
}

TEST_CASE("synthetic on the device: decoding on device-generated weights gives the CPU's md5 and logits") {
  struct Case {
    const char* spec;
    uint32_t context, new_tokens;
    std::vector<uint32_t> prompt;
  };
  for (const Case& c : {Case{"synthetic:tiny", 64, 16, {3, 141, 59, 26, 5}},
                        Case{"synthetic:tiny-tied@9", 64, 16, {7, 8}},
                        Case{"synthetic:qwen3-0.6b", 128, 6, {9, 151000, 42}}}) {
    CAPTURE(c.spec);
    const ModelWeights unfilled = load_model(c.spec, LoadOptions{.fill_host = false});
    const ModelWeights filled = load_model(c.spec);
    BuildOptions b;
    b.context = c.context;
    const Graph g = build_decode_graph(unfilled, b);
    const Decoded cpu = run_decode(g, filled, ExecutorKind::Sequential, c.prompt, c.new_tokens);
    const Decoded gpu = run_decode(g, unfilled, ExecutorKind::Cuda, c.prompt, c.new_tokens);
    REQUIRE(cpu.tokens.size() == c.new_tokens);
    CHECK(token_md5(gpu.tokens) == token_md5(cpu.tokens));
    REQUIRE(gpu.logits.size() == cpu.logits.size());
    CHECK(std::memcmp(gpu.logits.data(), cpu.logits.data(), cpu.logits.size() * sizeof(float)) == 0);
    std::printf("%s: md5 %s on the device and the CPU\n", c.spec, token_md5(cpu.tokens).c_str());
  }
}

TEST_CASE("synthetic on the device: a plan that does not tile in 16-byte groups is refused") {
  SyntheticPlan plan = synthetic_plan("tiny");
  plan.tensors[1].offset += 2;
  cuda::DeviceBuffer arena(plan.arena_bytes, "the test arena");
  CHECK_THROWS_WITH_AS(cuda::generate_synthetic(plan, arena.data()), doctest::Contains("is not laid out in whole 16-byte groups"),
                       Error);
}

// qwen3-8b: the old way (generate 16 GB on the host, upload it) against generating it on the
// device, and the two arenas compared whole. Needs ~33 GB of host memory; skipped by default
// (run with -tc='timing*' --no-skip).
TEST_CASE("timing: synthetic qwen3-8b generated on the device against the host plus an upload" * doctest::skip()) {
  const SyntheticPlan plan = synthetic_plan("qwen3-8b");
  cuda::DeviceBuffer arena(plan.arena_bytes, "the qwen3-8b arena");
  cuda::generate_synthetic(plan, arena.data());  // warm-up: module load, first touch of the pages
  auto t0 = std::chrono::steady_clock::now();
  cuda::generate_synthetic(plan, arena.data());
  const double device_s = seconds_since(t0);

  t0 = std::chrono::steady_clock::now();
  const ModelWeights host = make_synthetic("qwen3-8b");
  const double host_s = seconds_since(t0);
  cuda::DeviceBuffer uploaded(plan.arena_bytes, "the uploaded arena");
  t0 = std::chrono::steady_clock::now();
  REQUIRE(cudaMemcpy(uploaded.data(), host.arenas[0].data, plan.arena_bytes, cudaMemcpyHostToDevice) == cudaSuccess);
  const double upload_s = seconds_since(t0);
  std::printf("qwen3-8b synthetic arena %.2f GB: device generation %.3f s (%.0f GB/s written); "
              "host generation %.2f s + upload %.2f s = %.2f s\n",
              double(plan.arena_bytes) / 1e9, device_s, double(plan.arena_bytes) / 1e9 / device_s, host_s, upload_s,
              host_s + upload_s);
  CHECK(first_difference(read_back(arena.data(), arena.bytes()), host.arenas[0].data) == -1);
}

// The shaders' arithmetic is the host's, bit for bit (docs/numerics.md): division and square
// root done on the bits, pm_exp, pm_log, pm_log1p, silu, rsqrt and bf16 rounding, on edge
// cases and random inputs; and no float product in the embedded SPIR-V may be fused into an add.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <map>
#include <set>
#include <vector>

#include "host/vulkan_buffer.h"
#include "host/vulkan_context.h"
#include "host/vulkan_pipeline.h"
#include "ops/acc.h"
#include "ops/pmath.h"
#include "shaders/spirv.h"
#include "tests/vulkan_fixture.h"

using namespace spindle;

namespace {

enum Function : uint32_t { kDiv, kSqrt, kExp, kSilu, kRsqrt, kBf16, kLog, kLog1p };

struct Push {
  uint64_t a, b, result;
  uint32_t n, function;
};

// f(a[i], b[i]) for every i, on the device.
std::vector<uint32_t> on_device(Function f, const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  static vk::Context ctx(-1);
  static vk::Commands commands(ctx);
  static vk::ComputePipeline pipeline(ctx, shaders::numerics_test(), sizeof(Push), {});
  const size_t bytes = a.size() * 4;
  vk::Buffer da(ctx, bytes, true, "a"), db(ctx, bytes, true, "b"), dr(ctx, bytes, true, "result");
  std::memcpy(da.mapped(), a.data(), bytes);
  std::memcpy(db.mapped(), b.data(), bytes);
  const Push push{da.address(), db.address(), dr.address(), uint32_t(a.size()), f};
  VkCommandBuffer cmd = commands.begin();
  pipeline.dispatch(cmd, &push, uint32_t((a.size() + 63) / 64));
  vk::barrier(cmd);
  commands.submit_and_wait("the numerics test");
  std::vector<uint32_t> r(a.size());
  std::memcpy(r.data(), dr.mapped(), bytes);
  return r;
}

uint32_t bits(float f) { return bits_from_f32(f); }

// Edge cases of every kind, both signs, then random bit patterns of every exponent.
std::vector<uint32_t> inputs(uint32_t seed, size_t random_count) {
  std::vector<uint32_t> v = {0x00000000u, 0x00000001u, 0x00000002u, 0x00000003u, 0x007fffffu, 0x00400000u,
                             0x00800000u, 0x00800001u, 0x3f800000u, 0x3f800001u, 0x3f7fffffu, 0x40000000u,
                             0x40400000u, 0x7f7fffffu, 0x7f000000u, 0x7f800000u, 0x7fc00000u, 0x7fa00000u,
                             0x3fb504f3u, 0x42b17217u, 0x42b17218u, 0xc2cff1b4u, 0xc2aeac50u, 0x4b000000u};
  for (size_t i = 0, n = v.size(); i < n; ++i) v.push_back(v[i] | 0x80000000u);
  std::mt19937 rng(seed);
  for (size_t i = 0; i < random_count; ++i) v.push_back(rng());
  return v;
}

std::string hex(uint32_t u) {
  char s[16];
  std::snprintf(s, sizeof s, "0x%08x", u);
  return s;
}

bool is_nan_bits(uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; }

// Calls f(opcode, operands) for every instruction of a SPIR-V module, after its 5-word header
// (each instruction: word count << 16 | opcode, then its operands). False when the word counts
// do not add up to the module's length.
template <class F>
bool for_each_instruction(std::span<const uint32_t> words, F&& f) {
  size_t i = 5;
  while (i < words.size()) {
    const uint32_t count = words[i] >> 16;
    if (count == 0 || i + count > words.size()) return false;
    f(words[i] & 0xffffu, words.subspan(i + 1, count - 1));
    i += count;
  }
  return i == words.size();
}

// Compares with the host; a NaN matches a NaN (payloads are the hardware's business).
void check_against_host(Function f, const std::vector<uint32_t>& a, const std::vector<uint32_t>& b, float (*host)(float, float)) {
  const std::vector<uint32_t> got = on_device(f, a, b);
  size_t mismatches = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const uint32_t want = bits(host(f32_from_bits(a[i]), f32_from_bits(b[i])));
    if (got[i] == want || (is_nan_bits(got[i]) && is_nan_bits(want))) continue;
    if (++mismatches <= 5)
      MESSAGE("function " << f << ": a " << hex(a[i]) << " b " << hex(b[i]) << ": device " << hex(got[i]) << ", host "
                          << hex(want));
  }
  CHECK(mismatches == 0);
}

}  // namespace

TEST_CASE("vulkan: division and square root are correctly rounded, subnormals and specials included") {
  const std::vector<uint32_t> a = inputs(1, 200000), b = inputs(2, 200000);
  check_against_host(kDiv, a, b, [](float x, float y) { return x / y; });
  std::vector<uint32_t> a_rev(a.rbegin(), a.rend());
  check_against_host(kDiv, a, a_rev, [](float x, float y) { return x / y; });
  check_against_host(kSqrt, a, b, [](float x, float) { return std::sqrt(x); });
}

TEST_CASE("vulkan: pm_exp, silu, rsqrt and bf16 rounding give the host's bits") {
  std::vector<uint32_t> a = inputs(3, 0);
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> wide(-110.0f, 95.0f), narrow(-4.0f, 4.0f);
  for (int i = 0; i < 100000; ++i) a.push_back(bits(wide(rng)));
  for (int i = 0; i < 100000; ++i) a.push_back(bits(narrow(rng)));
  const std::vector<uint32_t> b(a.size(), 0);
  check_against_host(kExp, a, b, [](float x, float) { return pm_exp(x); });
  check_against_host(kSilu, a, b, [](float x, float) { return pm_silu(x); });
  check_against_host(kRsqrt, a, b, [](float x, float) { return pm_rsqrt(x); });
  check_against_host(kBf16, inputs(5, 200000), b, [](float x, float) { return f32_from_bits(f32_to_bf16(x)); });
}

// pm_log on every kind of input (subnormals, which the shader normalises on the bits, among
// them), and pm_log1p where softplus takes it: exp(x) for x up to 20, near 0 too.
TEST_CASE("vulkan: pm_log and pm_log1p give the host's bits") {
  std::vector<uint32_t> a = inputs(6, 200000);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> near_one(0.5f, 2.0f), exponent(-110.0f, 20.0f);
  for (int i = 0; i < 100000; ++i) a.push_back(bits(near_one(rng)));
  for (int i = 0; i < 100000; ++i) a.push_back(bits(pm_exp(exponent(rng))));
  const std::vector<uint32_t> b(a.size(), 0);
  check_against_host(kLog, a, b, [](float x, float) { return pm_log(x); });
  check_against_host(kLog1p, a, b, [](float x, float) { return pm_log1p(x); });
}

TEST_CASE("vulkan: every float add, subtract and multiply in the shaders is marked NoContraction") {
  for (const auto& [name, words] : {std::pair{"persistent", shaders::persistent()},
                                    std::pair{"persistent_sm", shaders::persistent_sm_ids()},
                                    std::pair{"numerics_test", shaders::numerics_test()}}) {
    CAPTURE(name);
    constexpr uint32_t kOpDecorate = 71, kNoContraction = 42, kOpFAdd = 129, kOpFSub = 131, kOpFMul = 133;
    std::set<uint32_t> decorated, arithmetic;
    REQUIRE(for_each_instruction(words, [&](uint32_t op, std::span<const uint32_t> o) {
      if (op == kOpDecorate && o[1] == kNoContraction) decorated.insert(o[0]);
      if (op == kOpFAdd || op == kOpFSub || op == kOpFMul) arithmetic.insert(o[1]);  // result id
    }));
    CHECK(!arithmetic.empty());
    size_t bare = 0;
    for (uint32_t id : arithmetic) bare += !decorated.count(id);
    CHECK(bare == 0);
  }
}

// What tasks exchange must be non-private, or the protocol's barriers order none of it (under
// the Vulkan memory model; glslang drops `devicecoherent` on buffer_reference blocks): every
// load and store through a writable physical-storage-buffer block carries NonPrivatePointer.
TEST_CASE("vulkan: every access to a writable buffer-reference block is non-private") {
  constexpr uint32_t kOpTypeStruct = 30, kOpTypePointer = 32, kOpMemberDecorate = 72, kOpLoad = 61, kOpStore = 62,
                     kOpAccessChain = 65, kOpInBoundsAccessChain = 66, kNonWritable = 24,
                     kPhysicalStorageBuffer = 5349, kNonPrivatePointer = 0x20;
  for (const auto& [name, words] : {std::pair{"persistent", shaders::persistent()},
                                    std::pair{"persistent_sm", shaders::persistent_sm_ids()}}) {
    CAPTURE(name);
    std::set<uint32_t> structs, read_only;
    std::map<uint32_t, uint32_t> pointee, type_of, base_of;  // pointer type -> struct; id -> type; chain -> base
    size_t checked = 0, private_accesses = 0;
    REQUIRE(for_each_instruction(words, [&](uint32_t op, std::span<const uint32_t> o) {
      if (op == kOpTypeStruct) structs.insert(o[0]);
      if (op == kOpMemberDecorate && o[2] == kNonWritable) read_only.insert(o[0]);
      if (op == kOpTypePointer && o[1] == kPhysicalStorageBuffer) pointee[o[0]] = o[2];
      if (op == kOpLoad) type_of[o[1]] = o[0];
      if (op == kOpAccessChain || op == kOpInBoundsAccessChain) base_of[o[1]] = o[2];
    }));
    REQUIRE(for_each_instruction(words, [&](uint32_t op, std::span<const uint32_t> o) {
      if (op != kOpLoad && op != kOpStore) return;
      const uint32_t pointer = op == kOpLoad ? o[2] : o[0];
      const size_t memory_operands = op == kOpLoad ? 3 : 2;
      const auto base = base_of.find(pointer);
      if (base == base_of.end()) return;
      const auto type = type_of.find(base->second);
      if (type == type_of.end()) return;
      const auto block = pointee.find(type->second);
      if (block == pointee.end() || !structs.count(block->second) || read_only.count(block->second)) return;
      ++checked;
      const uint32_t operands = o.size() > memory_operands ? o[memory_operands] : 0u;
      if (!(operands & kNonPrivatePointer)) ++private_accesses;
    }));
    CHECK(checked > 20);  // activations, caches, partials, step state, argmax slots
    CHECK(private_accesses == 0);
  }
}

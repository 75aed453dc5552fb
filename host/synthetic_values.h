// The values of synthetic weights: element `index` of tensor `name` under `seed` is a pure
// function, so the host, CUDA and shaders can all produce the same weights without files.
// Header-only; compiles for CUDA devices too. The formula, bit for bit:
//
//   key   = FNV-1a-64 of the canonical tensor name's bytes
//           (basis 0xCBF29CE484222325, prime 0x100000001B3)
//   h     = splitmix64(seed ^ key ^ (index * 0x9E3779B97F4A7C15))   all mod 2^64, where
//           splitmix64(x): z = x + 0x9E3779B97F4A7C15;
//                          z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
//                          z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
//                          return z ^ (z >> 31)
//   u     = float(int32(h >> 40) - 2^23) * 2^-23      in [-1, 1), exact
//   value = f32_to_bf16(offset + scale * u)           f32 product, rounded, then f32 sum
//                                                     (no FMA), then round to nearest even
//
// `scale` and `offset` depend on the tensor's role, from the one table below.
#pragma once
#include <math.h>
#include <stdint.h>

#include "ops/bf16.h"
#include "tasks/host_device.h"

namespace spindle::synth {

SP_HDI uint64_t tensor_key(const char* name, uint64_t length) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (uint64_t i = 0; i < length; ++i) {
    h ^= uint8_t(name[i]);
    h *= 0x100000001B3ull;
  }
  return h;
}

SP_HDI uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [-1, 1) on a grid of 2^-23.
SP_HDI float uniform(uint64_t seed, uint64_t key, uint64_t index) {
  uint64_t h = splitmix64(seed ^ key ^ (index * 0x9E3779B97F4A7C15ull));
  return float(int32_t(h >> 40) - (1 << 23)) * (1.0f / 8388608.0f);
}

SP_HDI bf16 value(uint64_t seed, uint64_t key, uint64_t index, float scale, float offset) {
  const float u = uniform(seed, key, index);
#ifdef __CUDA_ARCH__
  // The explicit roundings are never contracted into an FMA, whatever --fmad says.
  return f32_to_bf16(__fadd_rn(offset, __fmul_rn(scale, u)));
#else
  return f32_to_bf16(offset + scale * u);
#endif
}

// What a tensor is for, which sets its distribution.
enum class Role : uint32_t {
  Projection,       // a Linear weight [out, in], an untied lm_head included
  Embedding,        // the token embedding (a tied lm_head is the same tensor)
  Norm,             // a standard RMSNorm weight, used as w (qwen3, qwen3_moe)
  NormZeroCentred,  // a (1+w) RMSNorm weight (qwen3_next, qwen3_5, qwen3_5_moe)
  DecayLog,         // a Gated DeltaNet's A_log: its decay rate is exp(A_log)
  DecayBias,        // a Gated DeltaNet's dt_bias, added to α before the softplus
};

struct Init {
  float scale, offset;
};

// The one table of distributions:
//   role              scale            offset   so that
//   Projection        sqrt(3 / in)     0        uniform with std 1/sqrt(in): outputs keep unit scale
//   Embedding         sqrt(3 / H)      0        std 1/sqrt(H), like trained embeddings; a tied
//                                              lm_head then gives logits of std ~1, not ~sqrt(H)
//   Norm              0.1              1        weights near 1, as trained norms are
//   NormZeroCentred   0.1              0        effective scale 1 + w near 1
//   DecayLog          1                0.5      rates exp(A_log) in [0.6, 4.5), as trained ones lie
//   DecayBias         0.5              0        α + dt_bias near α: per-step decays mostly in (0.05, 0.9)
// sqrt and the division are IEEE correctly rounded in double, then rounded to float, so every
// device gets the same scale.
// fan_in is the hidden size for the embedding.
SP_HDI Init init_for(Role role, uint64_t fan_in) {
  switch (role) {
    case Role::Projection: return {float(sqrt(3.0 / double(fan_in))), 0.0f};
    case Role::Embedding: return {float(sqrt(3.0 / double(fan_in))), 0.0f};
    case Role::Norm: return {0.1f, 1.0f};
    case Role::NormZeroCentred: return {0.1f, 0.0f};
    case Role::DecayLog: return {1.0f, 0.5f};
    case Role::DecayBias: return {0.5f, 0.0f};
  }
  return {0.0f, 0.0f};
}

}  // namespace spindle::synth

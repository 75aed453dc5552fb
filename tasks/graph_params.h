// Model dimensions every task may read: one record per graph, bound once per executor.
#pragma once
#include <stdint.h>

#define SP_NORM_STANDARD 0u      // y = bf16(w * bf16(x/rms))          (qwen3, qwen3_moe)
#define SP_NORM_ZERO_CENTRED 1u  // y = bf16((x/rms) * (1 + w))        (next, 3.5)

struct SpGraphParams {
  uint32_t hidden;        // H
  uint32_t n_layers;      // L
  uint32_t n_heads;       // Hq
  uint32_t n_kv_heads;    // Hkv
  uint32_t head_dim;      // D
  uint32_t rotary_dim;    // R
  uint32_t intermediate;  // I
  uint32_t vocab;         // V
  uint32_t context;       // KV capacity in positions (rows of the RoPE table)
  uint32_t attn_chunks;   // chunks the positions 0..p are split into per kv head
  uint32_t norm_kind;     // SP_NORM_*
  float rms_eps;
  float rope_theta;
  uint32_t max_steps;     // capacity of the forced/out token arrays
  uint32_t attn_q_splits; // parts each kv head's q heads are split into (ATTENTION's tiles)
  // Devices a kv head's q-head splits are shared over (graphs over more devices than kv heads,
  // docs/multi-device.md): each device's first split appends its K/V rows. 0 or 1: one.
  uint32_t attn_kv_share;
};

#ifdef __cplusplus
static_assert(sizeof(SpGraphParams) == 64, "SpGraphParams must stay 16 words");

// The devices sharing each kv head's q heads over `devices`: devices / kv_heads over a multiple
// of the kv heads, else 1 (each device holds whole kv heads, or builds refuse the count).
inline uint32_t attn_kv_share_for(uint32_t devices, uint32_t kv_heads) {
  return devices > kv_heads && kv_heads && devices % kv_heads == 0 ? devices / kv_heads : 1u;
}
#endif

// Operand views: a task never holds an address, only an index into the graph's view table.
// A view is a 2-D strided window into one arena; each executor binds arenas to its own
// memory (host pointers, device pointers, Vulkan buffer addresses).
#pragma once
#include <stdint.h>

enum SpDtype : uint32_t { SP_BF16 = 0, SP_F32 = 1, SP_U32 = 2 };

// Fixed arenas. Weight arenas follow from SP_ARENA_WEIGHTS0 (one per checkpoint shard, or
// one for a synthetic model).
enum SpArena : uint32_t {
  SP_ARENA_STATE = 0,     // step state, forced tokens, out tokens
  SP_ARENA_WORK = 1,      // activations, partials, logits
  SP_ARENA_KV = 2,        // attention caches
  SP_ARENA_CONST = 3,     // tables derived from the config (RoPE cos/sin)
  SP_ARENA_RECURRENT = 4, // per-sequence recurrent state (GDN conv and delta-rule states, f32),
                          // read and written every token, zeroed for a new sequence
  SP_ARENA_SYMMETRIC = 5, // in a graph split over several devices (graph.h devices), the views
                          // every device holds at the same offset and every device's tasks
                          // write into all of them: the exchange (docs/multi-device.md)
  SP_ARENA_WEIGHTS0 = 6,
};
#define SP_MAX_ARENAS 64u

struct SpView {
  uint32_t arena;
  uint32_t dtype;         // SpDtype
  uint32_t offset_lo;     // byte offset into the arena (64-bit, split for shader use)
  uint32_t offset_hi;
  uint32_t rows;
  uint32_t cols;
  uint32_t row_stride;    // elements between rows
  uint32_t reserved;
};

#ifdef __cplusplus
static_assert(sizeof(SpView) == 32, "SpView must stay 8 words");
inline uint64_t sp_view_offset(const SpView& v) { return (uint64_t(v.offset_hi) << 32) | v.offset_lo; }
inline uint32_t sp_dtype_bytes(uint32_t dt) { return dt == SP_BF16 ? 2u : 4u; }
// "bf16", "f32", "u32", or "?" for a dtype no view may have (validate() refuses it).
inline const char* sp_dtype_name(uint32_t dt) {
  return dt == SP_BF16 ? "bf16" : dt == SP_F32 ? "f32" : dt == SP_U32 ? "u32" : "?";
}
#endif

// One lane's share of a canonical dot product (ops/dot.h) over n bf16 elements: lane l adds
// the products of elements 256j + 8l + e, e = 0..7, in increasing order. warp_sum() then
// finishes the dot. The loops take trips(n, 256) iterations in every lane (see workgroup.glsl
// on uniform loops).
#ifndef SP_DOT_GLSL
#define SP_DOT_GLSL

const uint DOT_BLOCK = 256u;
const uint DOT_VEC = 8u;

// a · b, both bf16 vectors in tasks' data (activations, caches).
precise float lane_dot(uint64_t a_addr, uint64_t b_addr, uint n) {
  Halves a = Halves(a_addr), b = Halves(b_addr);
  precise float acc = 0.0;
  for (uint j = 0u; j < trips(n, DOT_BLOCK); ++j) {
    [[unroll]] for (uint e = 0u; e < DOT_VEC; ++e) {
      const uint k = j * DOT_BLOCK + lane() * DOT_VEC + e;
      if (k < n) {
        precise float p = bf16_to_f32(uint(a.h[k])) * bf16_to_f32(uint(b.h[k]));
        acc = acc + p;
      }
    }
  }
  return acc;
}

// Ŵ_row · n̂, the weight row against the input staged in g_words (bf16 pairs).
precise float lane_dot_staged(uint64_t w_row, uint n) {
  ConstHalves w = ConstHalves(w_row);
  precise float acc = 0.0;
  for (uint j = 0u; j < trips(n, DOT_BLOCK); ++j) {
    [[unroll]] for (uint e = 0u; e < DOT_VEC; ++e) {
      const uint k = j * DOT_BLOCK + lane() * DOT_VEC + e;
      if (k < n) {
        precise float p = bf16_to_f32(uint(w.h[k])) * bf16_to_f32((g_words[k >> 1] >> (16u * (k & 1u))) & 0xffffu);
        acc = acc + p;
      }
    }
  }
  return acc;
}

#endif

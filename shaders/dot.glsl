// One lane's share of canonical dot products (ops/dot.h) over n bf16 elements: lane l adds
// the products of elements 256j + 8l + e, e = 0..7, in increasing order. warp_sum() then
// finishes each dot. A lane's 8 consecutive elements (an octet) travel as a uvec4, element 2i
// in the low half of word i: one 16-byte load where the row allows it (vec_readable), else
// eight 2-byte loads. The loops take the same trips in every lane (see workgroup.glsl on
// uniform loops).
#ifndef SP_DOT_GLSL
#define SP_DOT_GLSL

const uint DOT_BLOCK = 256u;
const uint DOT_VEC = 8u;
// A warp reads DOT_ROWS weight rows at once (GEMV's rows two by two, GATE_UP's gate and up
// rows of one output), DOT_UNROLL blocks of each, every load issued before the first product:
// up to DOT_ROWS * DOT_UNROLL 16-byte loads in flight a lane. (NVIDIA's compiler does not
// overlap the loads of a loop with a runtime trip count across its iterations.) The host sets
// DOT_UNROLL (1, 2, 4 or 8); the cost functions count trips of DOT_UNROLL blocks, so they hold
// for any depth, and the [[unroll]] loops over it have a constant trip count once specialised.
const uint DOT_ROWS = 2u;
layout(constant_id = 4) const uint DOT_UNROLL = 4u;

// Whether rows of n bf16 elements at addr, `stride` elements apart, can be read an octet at a
// time with 16-byte loads. Decided once for a task's operand, so it is uniform.
bool vec_readable(uint64_t addr, uint stride, uint n) {
  return (uint(addr) & 15u) == 0u && stride % DOT_VEC == 0u && n % DOT_VEC == 0u;
}

// The octet of elements k .. k+7 (k a multiple of 8) of the n-element bf16 row at `row`, zero
// past n: one 16-byte load when vec, else a 2-byte load per element. VECS and HALVES are the
// blocks it reads through: the read-only weights', or the non-private data's that tasks
// exchange (memory.glsl).
#define SP_DEFINE_LOAD8(NAME, VECS, HALVES)                                 \
  uvec4 NAME(uint64_t row, uint k, uint n, bool vec) {                      \
    if (vec) return VECS(row).v[k / DOT_VEC];                               \
    HALVES h = HALVES(row);                                                 \
    uvec4 o = uvec4(0u);                                                    \
    [[unroll]] for (uint e = 0u; e < DOT_VEC; ++e)                          \
      if (k + e < n) o[e / 2u] |= uint(h.h[k + e]) << (16u * (e % 2u));     \
    return o;                                                               \
  }
SP_DEFINE_LOAD8(weights8, ConstVecs, ConstHalves)
SP_DEFINE_LOAD8(data8, Vecs, Halves)

// Elements of the octet at k that lie before n.
uint octet_count(uint k, uint n) { return k < n ? min(n - k, DOT_VEC) : 0u; }

// The bf16 in the low or the high half of a word, widened.
precise float bf16_lo(uint w) { return uintBitsToFloat(w << 16); }
precise float bf16_hi(uint w) { return uintBitsToFloat(w & 0xffff0000u); }

// acc plus the products a_e · b_e of the first `count` elements of two octets, in increasing e.
precise float accumulate8(float acc, uvec4 a, uvec4 b, uint count) {
  precise float sum = acc;
  [[unroll]] for (uint i = 0u; i < 4u; ++i) {
    if (2u * i < count) {
      precise float p = bf16_lo(a[i]) * bf16_lo(b[i]);
      sum = sum + p;
    }
    if (2u * i + 1u < count) {
      precise float p = bf16_hi(a[i]) * bf16_hi(b[i]);
      sum = sum + p;
    }
  }
  return sum;
}

// a · b, both bf16 vectors in tasks' data (activations, caches).
precise float lane_dot(uint64_t a_addr, uint64_t b_addr, uint n) {
  const bool vec = vec_readable(a_addr, 0u, n) && vec_readable(b_addr, 0u, n);
  precise float acc = 0.0;
  for (uint j = 0u; j < trips(n, DOT_BLOCK); ++j) {
    const uint k = j * DOT_BLOCK + lane() * DOT_VEC;
    if (k < n) acc = accumulate8(acc, data8(a_addr, k, n, vec), data8(b_addr, k, n, vec), octet_count(k, n));
  }
  return acc;
}

// The octet at k of the input staged in g_vecs (op_projection.glsl).
uvec4 staged8(uint k) { return g_vecs[k / DOT_VEC]; }

// x̂ · x̂ of the staged input (its RMSNorm), DOT_UNROLL blocks a trip like lane_dot_rows.
precise float lane_dot_staged_self(uint K) {
  precise float acc = 0.0;
  for (uint j = 0u; j < trips(K, DOT_BLOCK * DOT_UNROLL); ++j) {
    uvec4 x[DOT_UNROLL];
    [[unroll]] for (uint u = 0u; u < DOT_UNROLL; ++u) {
      const uint k = (j * DOT_UNROLL + u) * DOT_BLOCK + lane() * DOT_VEC;
      x[u] = k < K ? staged8(k) : uvec4(0u);
    }
    [[unroll]] for (uint u = 0u; u < DOT_UNROLL; ++u)
      acc = accumulate8(acc, x[u], x[u], octet_count((j * DOT_UNROLL + u) * DOT_BLOCK + lane() * DOT_VEC, K));
  }
  return acc;
}

// lane_dot_rows for one load path: `vec` is a literal at each call, so the compiler drops the
// other path, and whole octets (vec) skip the per-element guards. No control flow lies between
// a trip's loads and its products: a lane past K loads the row's last octet and adds nothing
// (count 0). Loads under a guard (`k < K ? load : 0`), or a `continue` past K among the
// products, kept NVIDIA's compiler from having a trip's loads in flight together: without
// them qwen3-8b ran 1.4x faster (docs/EXPERIMENTS.md).
void lane_dot_rows_on(uint64_t row[DOT_ROWS], uint base, uint K, bool vec, out float acc[DOT_ROWS]) {
  [[unroll]] for (uint i = 0u; i < DOT_ROWS; ++i) acc[i] = 0.0;
  const uint last = (K - 1u) & ~(DOT_VEC - 1u);  // the last octet's first element
  for (uint j = 0u; j < trips(K, DOT_BLOCK * DOT_UNROLL); ++j) {
    uvec4 x[DOT_UNROLL], w[DOT_ROWS * DOT_UNROLL];
    [[unroll]] for (uint u = 0u; u < DOT_UNROLL; ++u) {
      const uint k = min((j * DOT_UNROLL + u) * DOT_BLOCK + lane() * DOT_VEC, last);
      x[u] = staged8(base + k);
      [[unroll]] for (uint i = 0u; i < DOT_ROWS; ++i) w[i * DOT_UNROLL + u] = weights8(row[i], k, K, vec);
    }
    [[unroll]] for (uint u = 0u; u < DOT_UNROLL; ++u) {
      const uint k = (j * DOT_UNROLL + u) * DOT_BLOCK + lane() * DOT_VEC;
      const uint count = k >= K ? 0u : vec ? DOT_VEC : octet_count(k, K);
      [[unroll]] for (uint i = 0u; i < DOT_ROWS; ++i) acc[i] = accumulate8(acc[i], w[i * DOT_UNROLL + u], x[u], count);
    }
  }
}

// Ŵ_row · n̂ for DOT_ROWS weight rows of K elements against the input staged in g_vecs from
// element `base` on (a multiple of DOT_VEC): lane partials into acc. Every row is read, so a
// caller with fewer rows left passes a real row again (its last) and ignores that partial.
// vec: every row is vec_readable. Each row's products are added in the canonical order.
void lane_dot_rows(uint64_t row[DOT_ROWS], uint base, uint K, bool vec, out float acc[DOT_ROWS]) {
  if (vec) lane_dot_rows_on(row, base, K, true, acc);
  else lane_dot_rows_on(row, base, K, false, acc);
}

#endif

// ATTN_CHUNK and ATTN_MERGE (docs/numerics.md). A chunk tile gives each q head of its kv
// head's group to a logical warp, which scores the chunk's positions twice (once for the max,
// once for the weights) rather than keeping the scores, so no length limits the chunk; a few
// positions at a time, their K and V rows loaded together. Every warp runs every loop
// (workgroup.glsl); one past the last head repeats it and writes nothing.
#ifndef SP_OP_ATTENTION_GLSL
#define SP_OP_ATTENTION_GLSL

const uint HEAD_DIM_MAX = 8u * LANES;  // a lane keeps 8 output dims
const uint NEG_INF = 0xff800000u;

// Positions [begin, end) of chunk c of [0, n) (ops/attention.h chunk_positions).
uvec2 chunk_positions(uint n, uint chunks, uint c) {
  const uint size = (n + chunks - 1u) / chunks;
  const uint begin = min(c * size, n);
  return uvec2(begin, min(begin + size, n));
}

// Float i of an octet (dot.glsl).
precise float octet_element(uvec4 o, uint i) { return i % 2u == 0u ? bf16_lo(o[i / 2u]) : bf16_hi(o[i / 2u]); }

// Positions of a chunk whose K (and V) octets a lane loads together, before the first is used
// (set by the host: 1, 2, 4 or 8).
layout(constant_id = 5) const uint ATTN_UNROLL = 4u;

// Operands: 0 q, 1 K cache, 2 V cache, 3 partials [Hq * chunks, D + 2] f32 {m, l, acc[D]}.
// A head has at most 256 dims, one block of the canonical dot: lane l holds dims 8l .. 8l + 7
// of q, of each K and V row, and of the output.
void run_attn_chunk(Task t) {
  uint position;
  if (!position_in_range(position)) return;
  const uint D = param(SP_PARAMS_head_dim), chunks = param(SP_PARAMS_attn_chunks);
  const uint context = param(SP_PARAMS_context);
  const uint group = param(SP_PARAMS_n_heads) / param(SP_PARAMS_n_kv_heads);
  const uint64_t q_all = load_view(t.operand[0]).addr;
  const View K = load_view(t.operand[1]), V = load_view(t.operand[2]), partials = load_view(t.operand[3]);
  const bool vec = vec_readable(q_all, D, D) && vec_readable(K.addr, K.stride, D) && vec_readable(V.addr, V.stride, D);
  const uint k8 = lane() * DOT_VEC, count = octet_count(k8, D);
  precise float scale = pm_rsqrt(float(D));
  for (uint tile = t.tile_begin; tile < t.tile_end; ++tile) {
    const uint kv = tile / chunks, c = tile % chunks;
    const uvec2 range = chunk_positions(position + 1u, chunks, c);
    const uint rounds = trips(range.y - range.x, ATTN_UNROLL);
    for (uint first = 0u; first < group; first += warps()) {
      const bool valid = first + warp() < group;
      const uint h = kv * group + min(first + warp(), group - 1u);  // past the group: write nothing
      Words row = Words(row_address(partials, h * chunks + c, 4u));
      if (range.x == range.y) {  // an empty chunk: {-inf, 0, 0...}
        for (uint j = 0u; j < trips(D + 1u, LANES); ++j) {
          const uint i = j * LANES + lane();
          if (valid && i <= D) row.w[i + 1u] = 0u;
        }
        if (valid && lane() == 0u) row.w[0] = NEG_INF;
        continue;
      }
      // A warp past the group's last head reads nothing (its sums are never written).
      const uvec4 q = valid && count > 0u ? data8(q_all + uint64_t(h) * D * 2u, k8, D, vec) : uvec4(0u);
      precise float m = uintBitsToFloat(NEG_INF);
      for (uint j = 0u; j < rounds; ++j) {
        uvec4 k_oct[ATTN_UNROLL];
        [[unroll]] for (uint u = 0u; u < ATTN_UNROLL; ++u) {
          const uint p = range.x + j * ATTN_UNROLL + u;
          k_oct[u] = valid && p < range.y && count > 0u ? data8(row_address(K, kv * context + p, 2u), k8, D, vec) : uvec4(0u);
        }
        [[unroll]] for (uint u = 0u; u < ATTN_UNROLL; ++u) {
          if (range.x + j * ATTN_UNROLL + u >= range.y) break;  // the same for the whole workgroup
          precise float s = warp_sum(accumulate8(0.0, q, k_oct[u], count)) * scale;
          if (!is_nan(s) && s > m) m = s;
        }
      }
      precise float l = 0.0;
      precise float acc[DOT_VEC];
      [[unroll]] for (uint i = 0u; i < DOT_VEC; ++i) acc[i] = 0.0;
      for (uint j = 0u; j < rounds; ++j) {
        uvec4 k_oct[ATTN_UNROLL], v_oct[ATTN_UNROLL];
        [[unroll]] for (uint u = 0u; u < ATTN_UNROLL; ++u) {
          const uint p = range.x + j * ATTN_UNROLL + u;
          const bool load = valid && p < range.y && count > 0u;
          k_oct[u] = load ? data8(row_address(K, kv * context + p, 2u), k8, D, vec) : uvec4(0u);
          v_oct[u] = load ? data8(row_address(V, kv * context + p, 2u), k8, D, vec) : uvec4(0u);
        }
        [[unroll]] for (uint u = 0u; u < ATTN_UNROLL; ++u) {
          if (range.x + j * ATTN_UNROLL + u >= range.y) break;  // the same for the whole workgroup
          precise float s = warp_sum(accumulate8(0.0, q, k_oct[u], count)) * scale;
          precise float weight = pm_exp(s - m);
          l = l + weight;
          [[unroll]] for (uint i = 0u; i < DOT_VEC; ++i) {
            if (i < count) {
              precise float term = weight * octet_element(v_oct[u], i);
              acc[i] = acc[i] + term;
            }
          }
        }
      }
      if (valid && lane() == 0u) {
        row.w[0] = floatBitsToUint(m);
        row.w[1] = floatBitsToUint(l);
      }
      [[unroll]] for (uint i = 0u; i < DOT_VEC; ++i)
        if (valid && i < count) row.w[2u + k8 + i] = floatBitsToUint(acc[i]);
    }
  }
}

uint cost_attn_chunk(Task t) {
  const uint D = param(SP_PARAMS_head_dim), chunks = param(SP_PARAMS_attn_chunks);
  const uint group = param(SP_PARAMS_n_heads) / param(SP_PARAMS_n_kv_heads);
  const uint longest = trips(step_state().w[SP_STATE_position] + 1u, chunks);
  const uint per_group = 2u * trips(longest, ATTN_UNROLL) + trips(D + 1u, LANES) + 1u;
  return (t.tile_end - t.tile_begin) * (trips(group, warps()) * per_group + 1u);
}

// Operands: 0 partials, 1 out [Hq * D] bf16.
void run_attn_merge(Task t) {
  const uint D = param(SP_PARAMS_head_dim), chunks = param(SP_PARAMS_attn_chunks);
  const View partials = load_view(t.operand[0]);
  const uint64_t out_all = load_view(t.operand[1]).addr;
  for (uint first = t.tile_begin; first < t.tile_end; first += warps()) {
    const bool valid = first + warp() < t.tile_end;
    const uint h = min(first + warp(), t.tile_end - 1u);  // past the last head: repeat, write nothing
    precise float M = uintBitsToFloat(NEG_INF);
    for (uint c = 0u; c < chunks; ++c) {
      precise float m = uintBitsToFloat(Words(row_address(partials, h * chunks + c, 4u)).w[0]);
      if (!is_nan(m) && m > M) M = m;
    }
    precise float L = 0.0;
    precise float o[8];
    [[unroll]] for (uint i = 0u; i < 8u; ++i) o[i] = 0.0;
    for (uint c = 0u; c < chunks; ++c) {  // chunk order, as the CPU sums
      Words row = Words(row_address(partials, h * chunks + c, 4u));
      precise float l = uintBitsToFloat(row.w[1]);
      if (l == 0.0) continue;  // an empty chunk
      precise float weight = pm_exp(uintBitsToFloat(row.w[0]) - M);
      precise float lw = l * weight;
      L = L + lw;
      [[unroll]] for (uint i = 0u; i < 8u; ++i) {
        const uint d = lane() + i * LANES;
        if (d < D) {
          precise float term = uintBitsToFloat(row.w[2u + d]) * weight;
          o[i] = o[i] + term;
        }
      }
    }
    Halves dst = Halves(out_all + uint64_t(h) * D * 2u);
    [[unroll]] for (uint i = 0u; i < 8u; ++i) {
      const uint d = lane() + i * LANES;
      if (valid && d < D) dst.h[d] = uint16_t(f32_to_bf16(exact_div(o[i], L)));
    }
  }
}

uint cost_attn_merge(Task t) {
  return trips(t.tile_end - t.tile_begin, warps()) * (2u * param(SP_PARAMS_attn_chunks) + 1u);
}

#endif

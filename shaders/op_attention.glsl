// ATTN_CHUNK and ATTN_MERGE (docs/numerics.md). A chunk tile gives each q head of its kv
// head's group to a logical warp, which scores the chunk's positions twice (once for the max,
// once for the weights) rather than keeping the scores, so no length limits the chunk. Every
// warp runs every loop (workgroup.glsl); one past the last head repeats it and writes nothing.
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

// Operands: 0 q, 1 K cache, 2 V cache, 3 partials [Hq * chunks, D + 2] f32 {m, l, acc[D]}.
void run_attn_chunk(Task t) {
  uint position;
  if (!position_in_range(position)) return;
  const uint D = param(SP_PARAMS_head_dim), chunks = param(SP_PARAMS_attn_chunks);
  const uint context = param(SP_PARAMS_context);
  const uint group = param(SP_PARAMS_n_heads) / param(SP_PARAMS_n_kv_heads);
  const uint64_t q_all = load_view(t.operand[0]).addr;
  const View K = load_view(t.operand[1]), V = load_view(t.operand[2]), partials = load_view(t.operand[3]);
  precise float scale = pm_rsqrt(float(D));
  for (uint tile = t.tile_begin; tile < t.tile_end; ++tile) {
    const uint kv = tile / chunks, c = tile % chunks;
    const uvec2 range = chunk_positions(position + 1u, chunks, c);
    for (uint first = 0u; first < group; first += warps()) {
      const bool valid = first + warp() < group;
      const uint h = kv * group + min(first + warp(), group - 1u);  // past the group: repeat, write nothing
      const uint64_t q = q_all + uint64_t(h) * D * 2u;
      Words row = Words(row_address(partials, h * chunks + c, 4u));
      if (range.x == range.y) {  // an empty chunk: {-inf, 0, 0...}
        for (uint j = 0u; j < trips(D + 1u, LANES); ++j) {
          const uint i = j * LANES + lane();
          if (valid && i <= D) row.w[i + 1u] = 0u;
        }
        if (valid && lane() == 0u) row.w[0] = NEG_INF;
        continue;
      }
      precise float m = uintBitsToFloat(NEG_INF);
      for (uint p = range.x; p < range.y; ++p) {
        precise float s = warp_sum(lane_dot(q, row_address(K, kv * context + p, 2u), D)) * scale;
        if (!is_nan(s) && s > m) m = s;
      }
      precise float l = 0.0;
      precise float acc[8];
      [[unroll]] for (uint i = 0u; i < 8u; ++i) acc[i] = 0.0;
      for (uint p = range.x; p < range.y; ++p) {
        precise float s = warp_sum(lane_dot(q, row_address(K, kv * context + p, 2u), D)) * scale;
        precise float weight = pm_exp(s - m);
        l = l + weight;
        Halves v = Halves(row_address(V, kv * context + p, 2u));
        [[unroll]] for (uint i = 0u; i < 8u; ++i) {
          const uint d = lane() + i * LANES;
          if (d < D) {
            precise float term = weight * bf16_to_f32(uint(v.h[d]));
            acc[i] = acc[i] + term;
          }
        }
      }
      if (valid && lane() == 0u) {
        row.w[0] = floatBitsToUint(m);
        row.w[1] = floatBitsToUint(l);
      }
      [[unroll]] for (uint i = 0u; i < 8u; ++i) {
        const uint d = lane() + i * LANES;
        if (valid && d < D) row.w[2u + d] = floatBitsToUint(acc[i]);
      }
    }
  }
}

uint cost_attn_chunk(Task t) {
  const uint D = param(SP_PARAMS_head_dim), chunks = param(SP_PARAMS_attn_chunks);
  const uint group = param(SP_PARAMS_n_heads) / param(SP_PARAMS_n_kv_heads);
  const uint longest = trips(step_state().w[SP_STATE_position] + 1u, chunks);
  const uint per_group = 2u * longest * (trips(D, DOT_BLOCK) + 1u) + trips(D + 1u, LANES) + 1u;
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

// The MLP gang task (ops/mlp.h, docs/numerics.md "MLP"), run whole (tasks/gang.h): workgroups
// have no co-residency guarantee, so rank 0's runs every member's phase 0, then every member's
// phase 1, and the other ranks' tasks only wait and signal. Each dot is the canonical one
// (dot.glsl), so the bits are the CPU reference's.
#ifndef SP_OP_MLP_GLSL
#define SP_OP_MLP_GLSL

// Where a member's activations are staged in g_vecs: in the octets after the normalised hidden
// state's (the host sizes g_vecs for both).
uint mlp_act_base(uint H) { return DOT_VEC * trips(H, DOT_VEC); }

// Member r's share of n rows split over w members (tasks/gang.h sp_gang_share).
uint gang_share(uint n, uint w, uint r) { return min(r * trips(n, w), n); }

// Phase 0 of piece `index` (mlp_piece), the normalised hidden state staged in g_vecs: its P
// activations, a warp a pair of them so that one warp writes each shared word, then down's dots
// over the piece's columns into partial row `index`.
void mlp_piece(View Wg, View Wu, View Wd, View partials, uint H, uint P, uint index) {
  const uint c0 = index * P, base = mlp_act_base(H), pairs = P / 2u;
  const bool gu_vec = vec_readable(Wg.addr, Wg.stride, H) && vec_readable(Wu.addr, Wu.stride, H);
  for (uint first = 0u; first < pairs; first += warps()) {
    const uint q = min(first + warp(), pairs - 1u);  // a warp past the last pair repeats it, writes nothing
    uint word = 0u;
    [[unroll]] for (uint e = 0u; e < 2u; ++e) {
      const uint r = c0 + 2u * q + e;
      const uint64_t rows[DOT_ROWS] = uint64_t[](row_address(Wg, r, 2u), row_address(Wu, r, 2u));
      word |= swiglu_rows(rows, 0u, H, gu_vec) << (16u * e);
    }
    if (first + warp() < pairs && lane() == 0u) set_shared_word(base / 2u + q, word);
  }
  sync_shared();
  const bool d_vec = vec_readable(Wd.addr + 2ul * c0, Wd.stride, P);
  Words row = Words(row_address(partials, index, 4u));
  for (uint g = 0u; g < trips(trips(H, warps()), DOT_ROWS); ++g) {
    uint r[DOT_ROWS];
    uint64_t rows[DOT_ROWS];
    [[unroll]] for (uint i = 0u; i < DOT_ROWS; ++i) {
      r[i] = warp() + (g * DOT_ROWS + i) * warps();
      rows[i] = row_address(Wd, min(r[i], H - 1u), 2u) + 2ul * c0;
    }
    float acc[DOT_ROWS];
    lane_dot_rows(rows, base, P, d_vec, acc);
    [[unroll]] for (uint i = 0u; i < DOT_ROWS; ++i) {
      precise float d = warp_sum(acc[i]);
      if (r[i] < H && lane() == 0u) row.w[r[i]] = floatBitsToUint(d);
    }
  }
  sync_shared();  // the next piece's activations replace these
}

// Phase 1 of rank `rank` of gang `gang` (mlp_gang_sum): the gang's pieces summed over the
// rank's share of the rows; the last gang to get there for the share adds the gangs' sums to
// hidden. Call in uniform control flow.
void mlp_gang_sum(View partials, uint64_t hidden, uint64_t arrivals, uint H, uint width, uint pieces, uint gangs,
                  uint gang, uint rank) {
  const uint i0 = gang_share(H, width, rank), i1 = gang_share(H, width, rank + 1u), stride = partials.stride;
  Words p = Words(partials.addr);
  for (uint i = i0 + invocation(); i < i1; i += gl_WorkGroupSize.x) {
    precise float sum = uintBitsToFloat(p.w[gang * width * stride + i]);
    for (uint m = 1u; m < width; ++m) {
      precise float next = sum + uintBitsToFloat(p.w[(gang * width + m) * stride + i]);
      sum = next;
    }
    p.w[(pieces + gang) * stride + i] = floatBitsToUint(sum);
  }
  if (!arrived_last(arrivals, rank, gangs)) return;
  Halves h = Halves(hidden);
  for (uint i = i0 + invocation(); i < i1; i += gl_WorkGroupSize.x) {
    precise float y = uintBitsToFloat(p.w[pieces * stride + i]);
    for (uint k = 1u; k < gangs; ++k) {
      precise float next = y + uintBitsToFloat(p.w[(pieces + k) * stride + i]);
      y = next;
    }
    precise float sum = bf16_to_f32(uint(h.h[i])) + bf16_to_f32(f32_to_bf16(y));
    h.h[i] = uint16_t(f32_to_bf16(sum));
  }
}

// Operands: 0 Wg, 1 Wu, 2 Wd, 3 hidden, 4 norm, 5 partials, 6 arrivals.
void run_mlp(Task t) {
  const uint width = max(t.gang_width, 1u);
  if (width > 1u && t.gang_rank != 0u) return;
  const View Wg = load_view(t.operand[0]), Wu = load_view(t.operand[1]), Wd = load_view(t.operand[2]);
  const View partials = load_view(t.operand[5]);
  const uint64_t hidden = load_view(t.operand[3]).addr, arrivals = load_view(t.operand[6]).addr;
  const uint H = Wd.rows, P = t.tile_end - t.tile_begin, pieces = Wd.cols / P, gangs = pieces / width;
  const uint index = t.tile_begin / P;
  stage_input(hidden, load_view(t.operand[4]).addr, H);
  for (uint r = 0u; r < width; ++r) mlp_piece(Wg, Wu, Wd, partials, H, P, index + r);
  sync_buffers();  // every member's pieces before the sums read them
  for (uint r = 0u; r < width; ++r) mlp_gang_sum(partials, hidden, arrivals, H, width, pieces, gangs, index / width, r);
}

uint cost_mlp(Task t) {
  const View Wd = load_view(t.operand[2]);
  const uint width = max(t.gang_width, 1u), H = Wd.rows, P = t.tile_end - t.tile_begin, gangs = Wd.cols / P / width;
  const uint gate_up = trips(P / 2u, warps()) * 2u * (trips(H, DOT_BLOCK * DOT_UNROLL) + 1u);
  const uint down = trips(trips(H, warps()), DOT_ROWS) * (trips(P, DOT_BLOCK * DOT_UNROLL) + 1u);
  const uint sums = trips(trips(H, width), gl_WorkGroupSize.x) * (width + gangs);
  return cost_stage_input(true, H) + width * (gate_up + down + sums);
}

#endif

// GEMV and GATE_UP (docs/numerics.md): the input is staged once per task in shared memory,
// RMSNorm'd when the task names a norm weight, then each logical warp computes the canonical
// dots of its rows, two rows at a time (dot.glsl's lane_dot_rows).
#ifndef SP_OP_PROJECTION_GLSL
#define SP_OP_PROJECTION_GLSL

// 1/rms from ss, the canonical dot of x̂ with itself over K elements (ops/norm.h).
precise float rms_inverse(float ss, uint K) {
  precise float mean = exact_div(ss, float(K));
  precise float shifted = mean + uintBitsToFloat(param(SP_PARAMS_rms_eps));
  return pm_rsqrt(shifted);
}

// One normalised element, as bf16 bits (ops/norm.h rms_norm_element), of the norm `kind`
// (SP_NORM_*): the graph's norm_kind, or the GDN's gated norm's own.
uint rms_norm_element(float x, float inv, float w, uint kind) {
  precise float scaled = x * inv;
  if (kind == SP_NORM_ZERO_CENTRED) {
    precise float y = scaled * (1.0 + w);
    return f32_to_bf16(y);
  }
  precise float y = rounded(scaled) * w;
  return f32_to_bf16(y);
}

// Octets of the input an invocation loads at once while staging it.
const uint STAGE_UNROLL = 4u;

// The octet an invocation stages in unrolled slot u of trip j.
uint stage_octet(uint j, uint u) { return (j * STAGE_UNROLL + u) * gl_WorkGroupSize.x + invocation(); }

// The octet that slot u of trip j loads: its own, or the last one past the end. The loads are
// unguarded (a guard kept NVIDIA's compiler from having them in flight together, dot.glsl);
// only the stores of octets past the end are skipped.
uint staged_octet(uint j, uint u, uint octets) { return min(stage_octet(j, u), octets - 1u); }

// The first `count` elements of an octet of x normalised with the octet of norm weights w.
uvec4 rms_norm_octet(uvec4 x, uvec4 w, float inv, uint count) {
  const uint kind = param(SP_PARAMS_norm_kind);
  uvec4 o = uvec4(0u);
  [[unroll]] for (uint i = 0u; i < 4u; ++i) {
    if (2u * i < count) o[i] = rms_norm_element(bf16_lo(x[i]), inv, bf16_lo(w[i]), kind);
    if (2u * i + 1u < count) o[i] |= rms_norm_element(bf16_hi(x[i]), inv, bf16_hi(w[i]), kind) << 16;
  }
  return o;
}

// g_vecs holds the octets of RMSNorm(x) when norm != 0, else of x (zero past K): x is copied
// in, each warp computes 1/rms from the copy (the same canonical dot in every warp), then the
// octets are normalised in place.
void stage_input(uint64_t x_addr, uint64_t norm_addr, uint K) {
  const uint octets = trips(K, DOT_VEC), rounds = trips(octets, gl_WorkGroupSize.x * STAGE_UNROLL);
  const bool x_vec = vec_readable(x_addr, 0u, K);
  for (uint j = 0u; j < rounds; ++j) {
    uvec4 x[STAGE_UNROLL];
    [[unroll]] for (uint u = 0u; u < STAGE_UNROLL; ++u) x[u] = data8(x_addr, DOT_VEC * staged_octet(j, u, octets), K, x_vec);
    [[unroll]] for (uint u = 0u; u < STAGE_UNROLL; ++u)
      if (stage_octet(j, u) < octets) g_vecs[stage_octet(j, u)] = x[u];
  }
  sync_shared();
  if (norm_addr == 0ul) return;  // uniform: the barriers below are met by every invocation or none
  precise float inv = rms_inverse(warp_sum(lane_dot_staged_self(K)), K);
  sync_shared();  // every warp has read x before it is overwritten
  const bool w_vec = vec_readable(norm_addr, 0u, K);
  for (uint j = 0u; j < rounds; ++j) {
    uvec4 w[STAGE_UNROLL];
    [[unroll]] for (uint u = 0u; u < STAGE_UNROLL; ++u) w[u] = weights8(norm_addr, DOT_VEC * staged_octet(j, u, octets), K, w_vec);
    [[unroll]] for (uint u = 0u; u < STAGE_UNROLL; ++u) {
      const uint i = stage_octet(j, u);
      if (i < octets) g_vecs[i] = rms_norm_octet(g_vecs[i], w[u], inv, octet_count(DOT_VEC * i, K));
    }
  }
  sync_shared();
}

uint cost_stage_input(bool norm, uint K) {
  const uint rounds = trips(trips(K, DOT_VEC), gl_WorkGroupSize.x * STAGE_UNROLL);
  return norm ? 2u * rounds + trips(K, DOT_BLOCK * DOT_UNROLL) : rounds;
}

uint64_t optional_view_address(uint v) { return v == SP_NO_VIEW ? 0ul : load_view(v).addr; }

// Row r of a bf16 or f32 output (f32 outputs hold bf16-rounded values: logits).
void store_output(View dst, uint r, uint bits) {
  if (dst.dtype == SP_BF16) Halves(dst.addr).h[r] = uint16_t(bits);
  else Words(dst.addr).w[r] = bits << 16;
}

// Lane 0 of each warp keeps {max, index} of its warp's stored rows (argmax_offer_logit in row
// order); the warps' results merge into the task's partial slot. Selection by (NaN, larger
// value, earlier index) is associative and commutative, so the merge gives what a scan of all
// the rows in order gives: NaN and the first row that is not finite when there is one. Every
// invocation merges (a loop over shared memory must run in all of them, workgroup.glsl);
// invocation 0 writes.
shared uvec2 s_best[gl_WorkGroupSize.x / LANES];

void write_argmax_partial(Task t, float value, uint index) {
  if (lane() == 0u) s_best[warp()] = uvec2(floatBitsToUint(value), index);
  sync_shared();
  float best_value = uintBitsToFloat(ARGMAX_NONE);
  uint best_index = t.tile_begin;
  for (uint w = 0u; w < warps(); ++w) {
    const float v = uintBitsToFloat(s_best[w].x);
    const uint i = s_best[w].y;
    const bool nan_first = is_nan(v) && (!is_nan(best_value) || i < best_index);
    if (nan_first || (!is_nan(best_value) && (v > best_value || (v == best_value && i < best_index)))) {
      best_value = v;
      best_index = i;
    }
  }
  if (invocation() != 0u) return;
  Words slot = Words(load_view(t.operand[6]).addr + 8ul * (t.operand[5] >> 16));
  slot.w[0] = floatBitsToUint(best_value);
  slot.w[1] = best_index;
}

// {pieces, a group's} of a split word, as tasks/gemv_split.h gemv_split reads it: fewer than 2
// pieces is one, group 0 all of them.
uvec2 gemv_split_of(uint word) {
  const uint pieces = word & 0xFFFFu, group = word >> 16;
  return pieces < 2u ? uvec2(1u) : uvec2(pieces, group == 0u ? pieces : group);
}

// Piece j's dot d added to a split's running sums, in ops/gemv.h split_sum's order: `sum` is
// its group's (started afresh at each group's first piece), `y` the groups' (the first group's
// sum, then each next one added).
void split_add(float d, uint j, uint group, inout float sum, inout float y) {
  precise float in_group = sum + d;
  sum = j % group == 0u ? d : in_group;
  if (j % group + 1u == group) {
    precise float total = y + sum;
    y = j < group ? sum : total;
  }
}

// The warp's dots of DOT_ROWS rows, each split in `pieces` pieces summed `group` at a time
// (ops/gemv.h split_row_dot): one canonical dot a piece, from the piece's first column; every
// lane gets the sums. The pieces are whole octets (the host checks), so vec holds for them too.
void split_dot_rows(uint64_t rows[DOT_ROWS], uint K, uint pieces, uint group, bool vec, out float y[DOT_ROWS]) {
  const uint P = K / pieces;
  float sums[DOT_ROWS];
  [[unroll]] for (uint i = 0u; i < DOT_ROWS; ++i) sums[i] = y[i] = 0.0;
  for (uint j = 0u; j < pieces; ++j) {
    uint64_t piece[DOT_ROWS];
    [[unroll]] for (uint i = 0u; i < DOT_ROWS; ++i) piece[i] = rows[i] + 2ul * uint64_t(j * P);
    float acc[DOT_ROWS];
    lane_dot_rows(piece, j * P, P, vec, acc);
    [[unroll]] for (uint i = 0u; i < DOT_ROWS; ++i) {
      precise float d = warp_sum(acc[i]);
      split_add(d, j, group, sums[i], y[i]);
    }
  }
}

// Warp w takes a task's rows tile_begin + w + q * warps for q = 0, 1, ..., DOT_ROWS at a time:
// the groups it takes, and group g's rows r with their addresses in W (a row past the task's
// last reads the last row again, since lane_dot_rows reads every row, and is not written).
uint warp_row_groups(Task t) { return trips(trips(t.tile_end - t.tile_begin, warps()), DOT_ROWS); }

void warp_rows(View W, Task t, uint g, out uint r[DOT_ROWS], out uint64_t rows[DOT_ROWS]) {
  [[unroll]] for (uint i = 0u; i < DOT_ROWS; ++i) {
    r[i] = t.tile_begin + warp() + (g * DOT_ROWS + i) * warps();
    rows[i] = row_address(W, min(r[i], t.tile_end - 1u), 2u);
  }
}

// Operands: 0 W, 1 x, 2 norm or none, 3 out, 4 residual or none, 5 flags, 6 argmax partials,
// 7 split (pieces | group << 16; 0: none). A warp's rows as warp_rows gives them.
void run_gemv(Task t) {
  const View W = load_view(t.operand[0]);
  const View dst = load_view(t.operand[3]);
  const uint64_t residual = optional_view_address(t.operand[4]);
  const uint K = W.cols;
  const bool vec = vec_readable(W.addr, W.stride, K);
  const uvec2 split = gemv_split_of(t.operand[7]);
  stage_input(load_view(t.operand[1]).addr, optional_view_address(t.operand[2]), K);
  float best_value = uintBitsToFloat(ARGMAX_NONE);  // lane 0's argmax of its warp's rows
  uint best_index = t.tile_begin;
  for (uint g = 0u; g < warp_row_groups(t); ++g) {
    uint r[DOT_ROWS];
    uint64_t rows[DOT_ROWS];
    warp_rows(W, t, g, r, rows);
    float y[DOT_ROWS];
    if (split.x > 1u) {
      split_dot_rows(rows, K, split.x, split.y, vec, y);
    } else {
      float acc[DOT_ROWS];
      lane_dot_rows(rows, 0u, K, vec, acc);
      [[unroll]] for (uint i = 0u; i < DOT_ROWS; ++i) y[i] = warp_sum(acc[i]);
    }
    [[unroll]] for (uint i = 0u; i < DOT_ROWS; ++i) {
      if (r[i] < t.tile_end && lane() == 0u) {
        uint bits = f32_to_bf16(y[i]);
        if (residual != 0ul) {
          precise float sum = bf16_to_f32(uint(Halves(residual).h[r[i]])) + bf16_to_f32(bits);
          bits = f32_to_bf16(sum);
        }
        store_output(dst, r[i], bits);
        argmax_offer_logit(best_value, best_index, bf16_to_f32(bits), r[i]);  // the value as stored
      }
    }
  }
  if ((t.operand[5] & 1u) != 0u) write_argmax_partial(t, best_value, best_index);
}

uint cost_gemv(Task t) {
  const uint K = load_view(t.operand[0]).cols;
  const uint argmax = (t.operand[5] & 1u) != 0u ? warps() : 0u;
  const uint pieces = gemv_split_of(t.operand[7]).x;
  const uint dot = pieces * (trips(K / pieces, DOT_BLOCK * DOT_UNROLL) + 1u);
  return cost_stage_input(t.operand[2] != SP_NO_VIEW, K) + warp_row_groups(t) * dot + argmax;
}

// A piece's dots (ops/gemv.h piece_dot_rows): x, the piece's slice, staged; a warp's rows as
// warp_rows gives them, each row's dot over W's columns (the piece's) into column r of partial
// row j, f32.
void piece_dots(Task t, View W, uint64_t x, View partials, uint j) {
  const uint P = W.cols;
  const bool vec = vec_readable(W.addr, W.stride, P);
  stage_input(x, 0ul, P);
  Words p = Words(partials.addr);
  for (uint g = 0u; g < warp_row_groups(t); ++g) {
    uint r[DOT_ROWS];
    uint64_t rows[DOT_ROWS];
    warp_rows(W, t, g, r, rows);
    float acc[DOT_ROWS];
    lane_dot_rows(rows, 0u, P, vec, acc);
    [[unroll]] for (uint i = 0u; i < DOT_ROWS; ++i) {
      precise float d = warp_sum(acc[i]);
      if (r[i] < t.tile_end && lane() == 0u) p.w[j * partials.stride + r[i]] = floatBitsToUint(d);
    }
  }
}

uint cost_piece_dots_of(Task t, uint P) {
  return cost_stage_input(false, P) + warp_row_groups(t) * (trips(P, DOT_BLOCK * DOT_UNROLL) + 1u);
}

// The pieces of column `column` of a pieces view (`split.x` rows of `stride` words) summed as
// split_add sums them.
float pieces_sum(Words w, uint column, uint stride, uvec2 split) {
  float y = 0.0, sum = 0.0;
  for (uint k = 0u; k < split.x; ++k) split_add(uintBitsToFloat(w.w[k * stride + column]), k, split.y, sum, y);
  return y;
}

// The pieces' partial rows over the task's rows summed in split_dot_rows' order (split_add), an
// invocation a row (ops/gemv.h piece_sum_rows): out = r(res + r(y)) with a residual, else r(y).
void piece_sums(Task t, View partials, uint64_t out_addr, uint64_t residual, uint word) {
  const uvec2 split = gemv_split_of(word);
  Halves dst = Halves(out_addr);
  for (uint r = t.tile_begin + invocation(); r < t.tile_end; r += gl_WorkGroupSize.x) {
    uint bits = f32_to_bf16(pieces_sum(Words(partials.addr), r, partials.stride, split));
    if (residual != 0ul) {
      precise float with_residual = bf16_to_f32(uint(Halves(residual).h[r])) + bf16_to_f32(bits);
      bits = f32_to_bf16(with_residual);
    }
    dst.h[r] = uint16_t(bits);
  }
}

uint cost_piece_sums(Task t, uint split) {
  return trips(t.tile_end - t.tile_begin, gl_WorkGroupSize.x) * (gemv_split_of(split).x + 1u);
}

// Operands: 0 W (the piece's columns), 1 x (its slice), 2 out, 3 residual or none, 4 partials,
// 5 arrivals, 6 piece | arrivals word << 16, 7 split. The piece's dots into its partial row; the
// last piece of these rows to count in sums every piece's.
void run_gemv_piece(Task t) {
  const View partials = load_view(t.operand[4]);
  piece_dots(t, load_view(t.operand[0]), load_view(t.operand[1]).addr, partials, t.operand[6] & 0xFFFFu);
  if (!arrived_last(load_view(t.operand[5]).addr, t.operand[6] >> 16, t.operand[7] & 0xFFFFu)) return;
  piece_sums(t, partials, load_view(t.operand[2]).addr, optional_view_address(t.operand[3]), t.operand[7]);
}

uint cost_gemv_piece(Task t) {
  return cost_piece_dots_of(t, load_view(t.operand[0]).cols) + cost_piece_sums(t, t.operand[7]);
}

// Operands: 0 W (the piece's columns), 1 x (its slice), 2 partials, 3 the piece j: the first half
// of GEMV_PIECE, whose partials other tasks sum (PIECE_SUM).
void run_piece_dots(Task t) {
  piece_dots(t, load_view(t.operand[0]), load_view(t.operand[1]).addr, load_view(t.operand[2]), t.operand[3]);
}

uint cost_piece_dots(Task t) { return cost_piece_dots_of(t, load_view(t.operand[0]).cols); }

// Operands: 0 partials, 1 out, 2 residual or none, 3 split: GEMV_PIECE's second half, once every
// piece's dots are in.
void run_piece_sum(Task t) {
  piece_sums(t, load_view(t.operand[0]), load_view(t.operand[1]).addr, optional_view_address(t.operand[2]), t.operand[3]);
}

uint cost_piece_sum(Task t) { return cost_piece_sums(t, t.operand[3]); }

// GATE_UP's activation of a gate row and an up row (rows[0], rows[1]) against the input staged
// from element `base` on: r(r(silu(g)) · u), g and u their rounded dots, as bf16 bits in every
// lane.
uint swiglu_rows(uint64_t rows[DOT_ROWS], uint base, uint K, bool vec) {
  float acc[DOT_ROWS];
  lane_dot_rows(rows, base, K, vec, acc);
  precise float g = rounded(warp_sum(acc[0]));
  precise float u = rounded(warp_sum(acc[1]));
  precise float y = rounded(pm_silu(g)) * u;
  return f32_to_bf16(y);
}

// Operands: 0 Wg, 1 Wu, 2 x, 3 norm, 4 out. A warp reads its row of Wg and of Wu together.
void run_gate_up(Task t) {
  const View Wg = load_view(t.operand[0]), Wu = load_view(t.operand[1]);
  Halves act = Halves(load_view(t.operand[4]).addr);
  const uint K = Wg.cols;
  const bool vec = vec_readable(Wg.addr, Wg.stride, K) && vec_readable(Wu.addr, Wu.stride, K);
  stage_input(load_view(t.operand[2]).addr, load_view(t.operand[3]).addr, K);
  for (uint first = t.tile_begin; first < t.tile_end; first += warps()) {
    const uint r = first + warp(), last = t.tile_end - 1u;
    const bool valid = r < t.tile_end;  // a warp past the last row reads the last again and writes nothing
    const uint64_t rows[DOT_ROWS] = uint64_t[](row_address(Wg, min(r, last), 2u), row_address(Wu, min(r, last), 2u));
    const uint y = swiglu_rows(rows, 0u, K, vec);
    if (valid && lane() == 0u) act.h[r] = uint16_t(y);
  }
}

uint cost_gate_up(Task t) {
  const uint K = load_view(t.operand[0]).cols, rows = t.tile_end - t.tile_begin;
  return cost_stage_input(true, K) + trips(rows, warps()) * (trips(K, DOT_BLOCK * DOT_UNROLL) + 1u);
}

#endif

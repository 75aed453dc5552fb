// ATTENTION (docs/numerics.md, ops/attention.h attention_tile). A (kv head, q-head split,
// chunk) tile gives each of its q heads to a logical warp, which normalises and rotates it into
// its shared slot and scores the chunk's positions twice (once for the max, once for the
// weights) rather than keeping the scores, so no length limits the chunk; a few positions at a
// time, their K and V rows loaded together. A tile whose chunk holds the step's position first
// normalises and rotates k into a slot of its own (its first warp's item), from which its warps
// read the position's K row (and its V row from the raw v), and in the kv head's first split
// appends k̂ and v to the caches; then every tile counts itself in, and the split's last merges.
// Every warp runs every loop (workgroup.glsl); one past the last head repeats it and writes
// nothing.
#ifndef SP_OP_ATTENTION_GLSL
#define SP_OP_ATTENTION_GLSL

const uint NEG_INF = 0xff800000u;

// The step's position, or a failure when it is past the KV capacity (then false). One read for
// the workgroup: the loops that follow hold barriers, so every invocation must see one value.
// Call in uniform control flow.
bool position_in_range(out uint position) {
  if (invocation() == 0u) s_position = step_state().w[SP_STATE_position];
  sync_shared();
  position = s_position;
  const uint context = param(SP_PARAMS_context);
  if (position < context) return true;
  fail_task(SP_FAIL_POSITION_RANGE, position, context);
  return false;
}

// Positions [begin, end) of chunk c of [0, n) (ops/attention.h chunk_positions).
uvec2 chunk_positions(uint n, uint chunks, uint c) {
  const uint size = (n + chunks - 1u) / chunks;
  const uint begin = min(c * size, n);
  return uvec2(begin, min(begin + size, n));
}

// How many chunks of [0, n) are non-empty (ops/attention.h nonempty_chunks).
uint nonempty_chunks(uint n, uint chunks) {
  const uint size = (n + chunks - 1u) / chunks;
  return (n + size - 1u) / size;
}

// Float i of an octet (dot.glsl).
precise float octet_element(uvec4 o, uint i) { return i % 2u == 0u ? bf16_lo(o[i / 2u]) : bf16_hi(o[i / 2u]); }

// Positions of a chunk whose K (and V) octets a lane loads together, before the first is used
// (set by the host: 1, 2, 4 or 8).
layout(constant_id = 5) const uint ATTN_UNROLL = 4u;

// RoPE(RMSNorm(x)) of the D-dim head at x_addr with the norm weights at w_addr, into the
// warp's shared slot, one bf16 a word (ops/qk_norm_rope.h norm_rope_head): normalised in, then
// each pair rotated in place by the lane that owns it. Call in uniform control flow.
void norm_rope_to_slot(uint64_t x_addr, uint64_t w_addr, ConstHalves rope, uint D, uint half_, uint slot) {
  precise float inv = rms_inverse(warp_sum(lane_dot(x_addr, x_addr, D)), D);
  Halves x = Halves(x_addr);
  ConstHalves w = ConstHalves(w_addr);
  for (uint j = 0u; j < trips(D, LANES); ++j) {
    const uint d = j * LANES + lane();
    if (d < D) {
      const uint y = rms_norm_element(bf16_to_f32(uint(x.h[d])), inv, bf16_to_f32(uint(w.h[d])), param(SP_PARAMS_norm_kind));
      set_shared_word(slot + d, y);
    }
  }
  sync_shared();
  for (uint j = 0u; j < trips(half_, LANES); ++j) {
    const uint i = j * LANES + lane();
    if (i >= half_) continue;
    precise float a = bf16_to_f32(shared_word(slot + i)), b = bf16_to_f32(shared_word(slot + i + half_));
    precise float c = bf16_to_f32(uint(rope.h[i])), s = bf16_to_f32(uint(rope.h[half_ + i]));
    precise float lo = rounded(a * c) + rounded(-b * s);
    precise float hi = rounded(b * c) + rounded(a * s);
    set_shared_word(slot + i, f32_to_bf16(lo));
    set_shared_word(slot + i + half_, f32_to_bf16(hi));
  }
  sync_shared();  // the head is read by other lanes of the warp
}

// The octet at k of the head in a shared slot, zero past D.
uvec4 slot8(uint slot, uint k, uint D) {
  uvec4 o = uvec4(0u);
  [[unroll]] for (uint e = 0u; e < DOT_VEC; ++e)
    if (k + e < D) o[e / 2u] |= shared_word(slot + k + e) << (16u * (e % 2u));
  return o;
}

// k̂ (in its slot) and v to the caches' rows of the position, by the warp that normed k in the
// kv head's first split (writes). Call in uniform control flow.
void append_kv(bool writes, uint slot, uint64_t v_addr, uint64_t k_row, uint64_t v_row, uint D) {
  Halves v = Halves(v_addr), k_dst = Halves(k_row), v_dst = Halves(v_row);
  for (uint j = 0u; j < trips(D, LANES); ++j) {
    const uint d = j * LANES + lane();
    if (writes && d < D) {
      k_dst.h[d] = uint16_t(shared_word(slot + d));
      v_dst.h[d] = v.h[d];
    }
  }
}

// One kv head's K and V rows: rows k_base + t and v_base + t of the cache, but the step's own
// position `own`'s, which are k̂ in the shared slot k_slot and the raw v at v_own.
struct KvRows {
  View cache;
  uint k_base, v_base, own, k_slot;
  uint64_t v_own;
};

// The octets at k of position p's K or V row.
uvec4 k_octet(KvRows kv, uint p, uint k, uint D, bool vec) {
  return p == kv.own ? slot8(kv.k_slot, k, D) : data8(row_address(kv.cache, kv.k_base + p, 2u), k, D, vec);
}
uvec4 v_octet(KvRows kv, uint p, uint k, uint D, bool vec, bool v_own_vec) {
  return p == kv.own ? data8(kv.v_own, k, D, v_own_vec) : data8(row_address(kv.cache, kv.v_base + p, 2u), k, D, vec);
}

// The partial {m, l, acc[D]} of the q head in the warp's slot over the positions `range` of one
// kv head's K and V rows into row, when writes. A head has at most 256 dims, one block of the
// canonical dot: lane l holds dims 8l .. 8l + 7 of q, of each K and V row, and of the output.
// A warp that writes nothing loads nothing.
void chunk_partial(bool writes, uint slot, KvRows kv, uvec2 range, Words row, uint D) {
  const bool vec = vec_readable(kv.cache.addr, kv.cache.stride, D), v_own_vec = vec_readable(kv.v_own, 0u, D);
  const uint k8 = lane() * DOT_VEC, count = octet_count(k8, D);
  const uint rounds = trips(range.y - range.x, ATTN_UNROLL);
  precise float scale = pm_rsqrt(float(D));
  const uvec4 q = writes && count > 0u ? slot8(slot, k8, D) : uvec4(0u);
  precise float m = uintBitsToFloat(NEG_INF);
  for (uint j = 0u; j < rounds; ++j) {
    uvec4 k_oct[ATTN_UNROLL];
    [[unroll]] for (uint u = 0u; u < ATTN_UNROLL; ++u) {
      const uint p = range.x + j * ATTN_UNROLL + u;
      const bool load = writes && p < range.y && count > 0u;
      k_oct[u] = load ? k_octet(kv, p, k8, D, vec) : uvec4(0u);
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
      const bool load = writes && p < range.y && count > 0u;
      k_oct[u] = load ? k_octet(kv, p, k8, D, vec) : uvec4(0u);
      v_oct[u] = load ? v_octet(kv, p, k8, D, vec, v_own_vec) : uvec4(0u);
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
  if (writes && lane() == 0u) {
    row.w[0] = floatBitsToUint(m);
    row.w[1] = floatBitsToUint(l);
  }
  [[unroll]] for (uint i = 0u; i < DOT_VEC; ++i)
    if (writes && i < count) row.w[2u + k8 + i] = floatBitsToUint(acc[i]);
}

// The tile's q heads (an attention tile's: tile_heads) of each kv head.
uint tile_heads() {
  return param(SP_PARAMS_n_heads) / param(SP_PARAMS_n_kv_heads) / param(SP_PARAMS_attn_q_splits);
}

// Elements from one q head to the next in qkv: D, or 2D in GATED_ATTENTION, whose q heads each
// hold their output gate beside them.
uint q_stride(bool gated) { return (gated ? 2u : 1u) * param(SP_PARAMS_head_dim); }

// The partials of the non-empty chunk c of unit = kv head * q splits + split. Items are the
// unit's q heads, after the k head when the chunk holds the position: the warp that normed k
// into its own slot (past the warps') appends k̂ and v in the first split, and the other warps'
// scores read k̂ from that slot after the barrier.
void attend_chunk(Task t, uint unit, uint c, uvec2 range, uint position, bool gated) {
  const uint D = param(SP_PARAMS_head_dim), half_ = param(SP_PARAMS_rotary_dim) / 2u;
  const uint Hq = param(SP_PARAMS_n_heads), Hkv = param(SP_PARAMS_n_kv_heads), group = tile_heads();
  const uint context = param(SP_PARAMS_context), chunks = param(SP_PARAMS_attn_chunks);
  const uint splits = param(SP_PARAMS_attn_q_splits), kv = unit / splits;
  const uint64_t qkv = load_view(t.operand[0]).addr;
  const uint64_t q_norm = load_view(t.operand[1]).addr, k_norm = load_view(t.operand[2]).addr;
  const View cache = load_view(t.operand[3]), partials = load_view(t.operand[5]);
  ConstHalves rope = ConstHalves(row_address(load_view(t.operand[4]), position, 2u));
  const uint64_t k_begin = qkv + uint64_t(Hq) * q_stride(gated) * 2u;
  const uint64_t v_own = k_begin + uint64_t(Hkv + kv) * D * 2u;
  const KvRows rows = KvRows(cache, kv * context, (Hkv + kv) * context, position, warps() * D, v_own);
  const uint lead = range.y == position + 1u ? 1u : 0u;  // item 0 is the k head
  const uint items = group + lead, slot = warp() * D;
  for (uint first = 0u; first < items; first += warps()) {
    const bool valid = first + warp() < items;
    const uint item = min(first + warp(), items - 1u);
    const bool is_k = item < lead;
    const uint h = unit * group + (is_k ? 0u : item - lead);
    norm_rope_to_slot(is_k ? k_begin + uint64_t(kv) * D * 2u : qkv + uint64_t(h) * q_stride(gated) * 2u,
                      is_k ? k_norm : q_norm, rope, D, half_, is_k ? rows.k_slot : slot);
    if (first < lead) {
      append_kv(valid && is_k && unit % splits == 0u, rows.k_slot, v_own, row_address(cache, rows.k_base + position, 2u),
                row_address(cache, rows.v_base + position, 2u), D);
      sync_shared();
    }
    Words row = Words(row_address(partials, h * chunks + c, 4u));
    chunk_partial(valid && !is_k, slot, rows, range, row, D);
  }
}

// r(o · r(sigmoid(gate))) of two bf16 (ops/attention.h attn_gated_output).
uint gated_output(uint o, uint gate) {
  precise float product = bf16_to_f32(o) * rounded(pm_sigmoid(bf16_to_f32(gate)));
  return f32_to_bf16(product);
}

// The group's q heads merged from the partials of their `used` non-empty chunks into out
// (ops/attention.h attn_merge_head), a warp a head, lane l dims l + 32i; with gates (not 0:
// GATED_ATTENTION's qkv + D, head h's gates q_stride(true) further each), each output times its
// gate.
void merge_group(View partials, uint64_t out_all, uint unit, uint group, uint chunks, uint used, uint D,
                 uint64_t gates) {
  for (uint first = 0u; first < group; first += warps()) {
    const bool valid = first + warp() < group;
    const uint h = unit * group + min(first + warp(), group - 1u);  // past the group: repeat, write nothing
    precise float M = uintBitsToFloat(NEG_INF);
    for (uint c = 0u; c < used; ++c) {
      precise float m = uintBitsToFloat(Words(row_address(partials, h * chunks + c, 4u)).w[0]);
      if (!is_nan(m) && m > M) M = m;
    }
    precise float L = 0.0;
    precise float o[8];
    [[unroll]] for (uint i = 0u; i < 8u; ++i) o[i] = 0.0;
    for (uint c = 0u; c < used; ++c) {  // chunk order, as the CPU sums
      Words row = Words(row_address(partials, h * chunks + c, 4u));
      precise float l = uintBitsToFloat(row.w[1]);
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
    Halves gate = Halves(gates + uint64_t(h) * 4u * D);
    [[unroll]] for (uint i = 0u; i < 8u; ++i) {
      const uint d = lane() + i * LANES;
      if (valid && d < D) {
        uint y = f32_to_bf16(exact_div(o[i], L));
        if (gates != 0ul) y = gated_output(y, uint(gate.h[d]));
        dst.h[d] = uint16_t(y);
      }
    }
  }
}

// Operands: 0 qkv, 1 q_norm, 2 k_norm, 3 KV cache, 4 RoPE table, 5 partials [Hq * chunks, D + 2]
// f32 {m, l, acc[D]}, 6 out [Hq * D] bf16, 7 arrivals [Hkv * q splits] u32. gated:
// GATED_ATTENTION's (q heads beside their gates in qkv).
void attention_tiles(Task t, bool gated) {
  uint position;
  if (!position_in_range(position)) return;
  const uint D = param(SP_PARAMS_head_dim), chunks = param(SP_PARAMS_attn_chunks), group = tile_heads();
  const View partials = load_view(t.operand[5]);
  const uint used = nonempty_chunks(position + 1u, chunks);
  for (uint tile = t.tile_begin; tile < t.tile_end; ++tile) {
    const uint unit = tile / chunks, c = tile % chunks;
    const uvec2 range = chunk_positions(position + 1u, chunks, c);
    if (range.x == range.y) continue;  // an empty chunk: no partials, no arrival
    attend_chunk(t, unit, c, range, position, gated);
    if (used == 1u) sync_workgroup_buffers();  // the only chunk merges its own partials
    if (used == 1u || arrived_last(load_view(t.operand[7]).addr, unit, used))
      merge_group(partials, load_view(t.operand[6]).addr, unit, group, chunks, used, D,
                  gated ? load_view(t.operand[0]).addr + uint64_t(D) * 2u : 0ul);
  }
}

void run_attention(Task t) { attention_tiles(t, false); }
void run_gated_attention(Task t) { attention_tiles(t, true); }

// An upper bound: every tile may append, and any may merge.
uint cost_attention(Task t) {
  const uint D = param(SP_PARAMS_head_dim), chunks = param(SP_PARAMS_attn_chunks), group = tile_heads();
  const uint longest = trips(step_state().w[SP_STATE_position] + 1u, chunks);
  const uint norm_rope = trips(D, DOT_BLOCK) + trips(D, LANES) + trips(param(SP_PARAMS_rotary_dim) / 2u, LANES);
  const uint per_item = norm_rope + trips(D, LANES) + 2u * trips(longest, ATTN_UNROLL) + trips(D + 1u, LANES) + 1u;
  const uint merge = trips(group, warps()) * (2u * chunks + 1u);
  return (t.tile_end - t.tile_begin) * (trips(group + 1u, warps()) * per_item + merge + 1u);
}

uint cost_gated_attention(Task t) { return cost_attention(t); }

#endif

// QK_NORM_ROPE (docs/numerics.md): one logical warp per head. q and k heads are RMSNorm'd
// into shared memory, then rotated pairwise at the step's position; v heads are copied. Every
// warp runs every loop (workgroup.glsl); a head's kind only decides what it writes.
#ifndef SP_OP_QK_NORM_ROPE_GLSL
#define SP_OP_QK_NORM_ROPE_GLSL

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

// Operands: 0 qkv, 1 q_norm, 2 k_norm, 3 q_out, 4 K cache, 5 V cache, 6 RoPE table.
void run_qk_norm_rope(Task t) {
  uint position;
  if (!position_in_range(position)) return;
  const uint D = param(SP_PARAMS_head_dim), half_ = param(SP_PARAMS_rotary_dim) / 2u;
  const uint Hq = param(SP_PARAMS_n_heads), Hkv = param(SP_PARAMS_n_kv_heads);
  const uint context = param(SP_PARAMS_context);
  const uint64_t qkv = load_view(t.operand[0]).addr, q_out = load_view(t.operand[3]).addr;
  const View k_cache = load_view(t.operand[4]), v_cache = load_view(t.operand[5]);
  ConstHalves rope = ConstHalves(row_address(load_view(t.operand[6]), position, 2u));
  const uint slot = warp() * D;  // this warp's normed head in shared memory, one element a word
  for (uint first = t.tile_begin; first < t.tile_end; first += warps()) {
    const bool valid = first + warp() < t.tile_end;
    const uint h = min(first + warp(), t.tile_end - 1u);  // a warp past the last head repeats it, writing nothing
    const bool is_q = h < Hq, is_k = !is_q && h < Hq + Hkv;
    const bool normed = valid && (is_q || is_k);
    const uint64_t x_addr = qkv + uint64_t(h) * D * 2u;
    precise float inv = rms_inverse(warp_sum(lane_dot(x_addr, x_addr, D)), D);
    Halves x = Halves(x_addr);
    Halves dst = Halves(is_q ? q_out + uint64_t(h) * D * 2u
                        : is_k ? row_address(k_cache, (h - Hq) * context + position, 2u)
                               : row_address(v_cache, (h - Hq - Hkv) * context + position, 2u));
    const uint tail = D - 2u * half_;  // dims past the rotary ones keep their normed value
    for (uint j = 0u; j < trips(D, LANES); ++j) {
      const uint d = j * LANES + lane();
      if (valid && !normed && d < D) dst.h[d] = x.h[d];
    }
    ConstHalves w = ConstHalves(load_view(is_q ? t.operand[1] : t.operand[2]).addr);
    for (uint j = 0u; j < trips(D, LANES); ++j) {
      const uint d = j * LANES + lane();
      if (normed && d < D) set_shared_word(slot + d, rms_norm_element(bf16_to_f32(uint(x.h[d])), inv, bf16_to_f32(uint(w.h[d]))));
    }
    sync_shared();
    for (uint j = 0u; j < trips(half_, LANES); ++j) {
      const uint i = j * LANES + lane();
      if (!normed || i >= half_) continue;
      precise float a = bf16_to_f32(shared_word(slot + i)), b = bf16_to_f32(shared_word(slot + i + half_));
      precise float c = bf16_to_f32(uint(rope.h[i])), s = bf16_to_f32(uint(rope.h[half_ + i]));
      precise float lo = rounded(a * c) + rounded(-b * s);
      precise float hi = rounded(b * c) + rounded(a * s);
      dst.h[i] = uint16_t(f32_to_bf16(lo));
      dst.h[i + half_] = uint16_t(f32_to_bf16(hi));
    }
    for (uint j = 0u; j < trips(tail, LANES); ++j) {
      const uint d = 2u * half_ + j * LANES + lane();
      if (normed && d < D) dst.h[d] = uint16_t(shared_word(slot + d));
    }
    sync_shared();  // the head is read before the next one is written
  }
}

uint cost_qk_norm_rope(Task t) {
  const uint D = param(SP_PARAMS_head_dim);
  return trips(t.tile_end - t.tile_begin, warps()) * (trips(D, DOT_BLOCK) + 3u * trips(D, LANES) + 1u);
}

#endif

// GEMV and GATE_UP (docs/numerics.md): the input is staged once per task in shared memory,
// RMSNorm'd when the task names a norm weight, then each logical warp takes one row at a time
// and computes its canonical dot.
#ifndef SP_OP_PROJECTION_GLSL
#define SP_OP_PROJECTION_GLSL

// 1/rms from ss, the canonical dot of x̂ with itself over K elements (ops/norm.h).
precise float rms_inverse(float ss, uint K) {
  precise float mean = exact_div(ss, float(K));
  precise float shifted = mean + uintBitsToFloat(param(SP_PARAMS_rms_eps));
  return pm_rsqrt(shifted);
}

// One normalised element, as bf16 bits (ops/norm.h rms_norm_element).
uint rms_norm_element(float x, float inv, float w) {
  precise float scaled = x * inv;
  if (param(SP_PARAMS_norm_kind) == SP_NORM_ZERO_CENTRED) {
    precise float y = scaled * (1.0 + w);
    return f32_to_bf16(y);
  }
  precise float y = rounded(scaled) * w;
  return f32_to_bf16(y);
}

// g_words[k/2] holds elements k, k+1 of RMSNorm(x) when norm != 0, else of x.
void stage_input(uint64_t x_addr, uint64_t norm_addr, uint K) {
  // warp_sum has barriers: called by every invocation, norm or not.
  precise float ss = warp_sum(norm_addr != 0ul ? lane_dot(x_addr, x_addr, K) : 0.0);
  precise float inv = norm_addr != 0ul ? rms_inverse(ss, K) : 0.0;
  Halves x = Halves(x_addr);
  ConstHalves w = ConstHalves(norm_addr);
  const uint pairs = (K + 1u) / 2u;
  for (uint j = 0u; j < trips(pairs, gl_WorkGroupSize.x); ++j) {
    const uint pair = j * gl_WorkGroupSize.x + invocation();
    if (pair >= pairs) continue;
    uint word = 0u;
    [[unroll]] for (uint i = 0u; i < 2u; ++i) {
      const uint k = 2u * pair + i;
      if (k < K) {
        uint v = uint(x.h[k]);
        if (norm_addr != 0ul) v = rms_norm_element(bf16_to_f32(v), inv, bf16_to_f32(uint(w.h[k])));
        word |= v << (16u * i);
      }
    }
    g_words[pair] = word;
  }
  sync_shared();
}

uint cost_stage_input(bool norm, uint K) { return (norm ? trips(K, DOT_BLOCK) : 0u) + trips((K + 1u) / 2u, gl_WorkGroupSize.x); }

uint64_t optional_view_address(uint v) { return v == SP_NO_VIEW ? 0ul : load_view(v).addr; }

// Row r of a bf16 or f32 output (f32 outputs hold bf16-rounded values: logits).
void store_output(View dst, uint r, uint bits) {
  if (dst.dtype == SP_BF16) Halves(dst.addr).h[r] = uint16_t(bits);
  else Words(dst.addr).w[r] = bits << 16;
}

float load_output(View dst, uint r) {
  return dst.dtype == SP_BF16 ? bf16_to_f32(uint(Halves(dst.addr).h[r])) : uintBitsToFloat(Words(dst.addr).w[r]);
}

// {max, index} of the task's stored rows, scanned in row order, into its partial slot.
void write_argmax_partial(Task t, View dst) {
  sync_buffers();  // every warp's rows are stored
  if (invocation() != 0u) return;
  float best_value = uintBitsToFloat(0x7fc00000u);
  uint best_index = t.tile_begin;
  for (uint r = t.tile_begin; r < t.tile_end; ++r) argmax_offer(best_value, best_index, load_output(dst, r), r);
  Words slot = Words(load_view(t.operand[6]).addr + 8ul * (t.operand[5] >> 16));
  slot.w[0] = floatBitsToUint(best_value);
  slot.w[1] = best_index;
}

// Operands: 0 W, 1 x, 2 norm or none, 3 out, 4 residual or none, 5 flags, 6 argmax partials.
void run_gemv(Task t) {
  const View W = load_view(t.operand[0]);
  const View dst = load_view(t.operand[3]);
  const uint64_t residual = optional_view_address(t.operand[4]);
  const uint K = W.cols;
  stage_input(load_view(t.operand[1]).addr, optional_view_address(t.operand[2]), K);
  const uint last = t.tile_end - 1u;  // a warp past the last row repeats it and drops the result
  for (uint first = t.tile_begin; first < t.tile_end; first += warps()) {
    const uint r = first + warp();
    const bool valid = r < t.tile_end;
    precise float y = warp_sum(lane_dot_staged(row_address(W, min(r, last), 2u), K));
    if (valid && lane() == 0u) {
      uint bits = f32_to_bf16(y);
      if (residual != 0ul) {
        precise float sum = bf16_to_f32(uint(Halves(residual).h[r])) + bf16_to_f32(bits);
        bits = f32_to_bf16(sum);
      }
      store_output(dst, r, bits);
    }
  }
  if ((t.operand[5] & 1u) != 0u) write_argmax_partial(t, dst);
}

uint cost_gemv(Task t) {
  const uint K = load_view(t.operand[0]).cols, rows = t.tile_end - t.tile_begin;
  const uint argmax = (t.operand[5] & 1u) != 0u ? rows : 0u;
  return cost_stage_input(t.operand[2] != SP_NO_VIEW, K) + trips(rows, warps()) * (trips(K, DOT_BLOCK) + 1u) + argmax;
}

// Operands: 0 Wg, 1 Wu, 2 x, 3 norm, 4 out.
void run_gate_up(Task t) {
  const View Wg = load_view(t.operand[0]), Wu = load_view(t.operand[1]);
  Halves act = Halves(load_view(t.operand[4]).addr);
  const uint K = Wg.cols;
  stage_input(load_view(t.operand[2]).addr, load_view(t.operand[3]).addr, K);
  const uint last = t.tile_end - 1u;  // a warp past the last row repeats it and drops the result
  for (uint first = t.tile_begin; first < t.tile_end; first += warps()) {
    const uint r = first + warp();
    const bool valid = r < t.tile_end;
    precise float g = rounded(warp_sum(lane_dot_staged(row_address(Wg, min(r, last), 2u), K)));
    precise float u = rounded(warp_sum(lane_dot_staged(row_address(Wu, min(r, last), 2u), K)));
    if (valid && lane() == 0u) {
      precise float y = rounded(pm_silu(g)) * u;
      act.h[r] = uint16_t(f32_to_bf16(y));
    }
  }
}

uint cost_gate_up(Task t) {
  const uint K = load_view(t.operand[0]).cols, rows = t.tile_end - t.tile_begin;
  return cost_stage_input(true, K) + trips(rows, warps()) * 2u * (trips(K, DOT_BLOCK) + 1u);
}

#endif

// GDN (tasks/opcodes.h SP_OP_GDN; ops/gdn.h gdn_head, docs/numerics.md), bit for bit the CPU
// reference's, one value head h of the record after another: every invocation a channel of the
// conv of h's q, k and v channels; every invocation the gates (the same values in each, so no
// barrier shares them); every warp the L2 norms' canonical dots, then an invocation an element
// of q̂ and k̂; a warp a row of h's state for the delta rule, lane l holding the row's elements
// 8l .. 8l + 7 in registers between its two dots (a key head of at most 256 elements, one block
// of the canonical dot: the host refuses larger ones); then the gated RMSNorm, an invocation an
// element.
//
// Shared words, f32 bits (tasks/op_decls.cpp sizes them): q [0, dk), k [dk, 2dk) and
// v [2dk, 2dk + dv) as the conv gives them (q̂ and k̂ once normed), then o [2dk + dv, 2dk + 2dv),
// the delta rule's rounded outputs.
#ifndef SP_OP_GDN_GLSL
#define SP_OP_GDN_GLSL

// The shape of a GDN record (tasks/gdn_shape.h), from its views, which validate() checked, and
// the value heads it runs: its tiles are state rows (value dim j of head h is tile h·dv + j),
// whole heads, or a gang member's share of one head. The shader runs a gang whole (tasks/gang.h:
// workgroups have no co-residency guarantee): rank 0's record the whole head, the other ranks'
// nothing, as the CPU executors do.
struct GdnShape {
  uint Hk, Hv, dk, dv, Kc, C;
  uint head, heads;
};

GdnShape gdn_shape(Task t) {
  const View conv = load_view(t.operand[1]);
  const uint Hv = load_view(t.operand[2]).cols, dv = load_view(t.operand[4]).cols, dk = load_view(t.operand[6]).cols;
  const bool gang = t.gang_width > 1u;
  const uint heads = gang ? (t.gang_rank == 0u ? 1u : 0u) : (t.tile_end - t.tile_begin) / dv;
  return GdnShape((conv.rows - Hv * dv) / (2u * dk), Hv, dk, dv, conv.cols, conv.rows, t.tile_begin / dv, heads);
}

uint gdn_o_word(GdnShape s) { return 2u * s.dk + s.dv; }

// A channel's conv output (ops/gdn.h conv_ring_output), as bf16 bits: tap j < Kc − 1 on the
// ring's slot (position + 1 + j) % Kc, the last on x; r(silu(r(Σ_j w_j · in_j))), j increasing.
// The taps are unrolled to the most a graph may have (op_decls.h kMaxConvKernel), which costs
// the loop limit nothing.
uint conv_output(ConstHalves w, Halves ring, uint x, uint Kc, uint position) {
  precise float sum = 0.0;
  [[unroll]] for (uint j = 0u; j < SP_MAX_CONV_KERNEL; ++j) {
    if (j < Kc) {
      const uint tap = j + 1u < Kc ? uint(ring.h[(position + 1u + j) % Kc]) : x;
      precise float product = bf16_to_f32(uint(w.h[j])) * bf16_to_f32(tap);
      sum = sum + product;
    }
  }
  return f32_to_bf16(pm_silu(rounded(sum)));
}

// The conv of head h's channels (its key head g's q and k, then its own v), an invocation a
// channel, into the shared words q, k, v. The newest input goes to its ring slot, which no tap
// of this step reads: the v channels' by h, the q and k channels' by g's first value head
// alone, so that the tiles sharing them never race. Call in uniform control flow.
void gdn_conv(Task t, GdnShape s, uint h, uint position) {
  Halves proj = Halves(load_view(t.operand[0]).addr);
  const View conv_w = load_view(t.operand[1]), rings = load_view(t.operand[5]);
  const uint group = s.Hv / s.Hk, g = h / group, channels = 2u * s.dk + s.dv, n = gl_WorkGroupSize.x;
  for (uint j = 0u; j < trips(channels, n); ++j) {
    const uint i = j * n + invocation();
    if (i >= channels) continue;
    const uint c = i < s.dk ? g * s.dk + i
                 : i < 2u * s.dk ? (s.Hk + g) * s.dk + i - s.dk
                                 : 2u * s.Hk * s.dk + h * s.dv + i - 2u * s.dk;
    Halves ring = Halves(row_address(rings, c, 2u));
    const uint x = uint(proj.h[c]);
    set_shared_word(i, conv_output(ConstHalves(row_address(conv_w, c, 2u)), ring, x, s.Kc, position) << 16);
    if (i >= 2u * s.dk || h % group == 0u) ring.h[position % s.Kc] = uint16_t(x);
  }
  sync_shared();
}

// The canonical dot (ops/dot.h) of the n f32 shared words from a with those from b, in every
// lane. Call in uniform control flow.
precise float shared_dot(uint a, uint b, uint n) {
  precise float acc = 0.0;
  for (uint j = 0u; j < trips(n, DOT_BLOCK); ++j) {
    [[unroll]] for (uint e = 0u; e < DOT_VEC; ++e) {
      const uint i = j * DOT_BLOCK + lane() * DOT_VEC + e;
      if (i < n) {
        precise float product = uintBitsToFloat(shared_word(a + i)) * uintBitsToFloat(shared_word(b + i));
        acc = acc + product;
      }
    }
  }
  return warp_sum(acc);
}

// softplus with transformers' threshold (ops/gdn.h softplus).
precise float softplus(float x) { return x > 20.0 ? x : pm_log1p(pm_exp(x)); }

// Head h's β = r(sigmoid(b)) and decay exp(g), g = −exp(A_log) · softplus(α + dt_bias)
// (ops/gdn.h gdn_gates), b and α after the channels and z in proj.
void gdn_gates(Task t, GdnShape s, uint h, out float beta, out float decay) {
  Halves ba = Halves(load_view(t.operand[0]).addr + 2ul * (s.C + s.Hv * s.dv));
  const float A_log = bf16_to_f32(uint(ConstHalves(load_view(t.operand[2]).addr).h[h]));
  const float dt_bias = bf16_to_f32(uint(ConstHalves(load_view(t.operand[3]).addr).h[h]));
  precise float alpha = bf16_to_f32(uint(ba.h[s.Hv + h])) + dt_bias;
  precise float g = -pm_exp(A_log) * softplus(alpha);
  beta = rounded(pm_sigmoid(bf16_to_f32(uint(ba.h[h]))));
  decay = pm_exp(g);
}

// The L2 norms of q and k in place (ops/gdn.h l2_inverse, gdn_query_element): k̂ = k · inv_k and
// q̂ = q · inv_q / sqrt(dk), the inverses rsqrt(x · x + 1e-6) from every warp's canonical dots
// (the same values in each), an invocation an element. Call in uniform control flow.
void gdn_l2_norms(GdnShape s) {
  precise float inv_q = pm_rsqrt(shared_dot(0u, 0u, s.dk) + SP_GDN_L2_EPS);
  precise float inv_k = pm_rsqrt(shared_dot(s.dk, s.dk, s.dk) + SP_GDN_L2_EPS);
  precise float root = exact_sqrt(float(s.dk));
  sync_shared();  // every warp has read q and k
  const uint n = gl_WorkGroupSize.x;
  for (uint j = 0u; j < trips(2u * s.dk, n); ++j) {
    const uint i = j * n + invocation();
    if (i >= 2u * s.dk) continue;
    precise float x = uintBitsToFloat(shared_word(i)) * (i < s.dk ? inv_q : inv_k);
    set_shared_word(i, floatBitsToUint(i < s.dk ? exact_div(x, root) : x));
  }
  sync_shared();
}

// The delta rule on head h's state rows (ops/gdn.h gdn_head_step), a warp a row j (value dim
// j): the lane's run of it decayed, S'_j = S_j · decay; m = S'_j · k̂; δ = (v_j − m) · β;
// S''_j = S'_j + k̂ · δ, stored; o_j = r(S''_j · q̂) into the shared words o. A warp past the
// last row loads and stores nothing. The state is read a float at a time: it is small beside
// the weights a step reads. Call in uniform control flow.
void gdn_rows(View state, GdnShape s, uint h, float beta, float decay) {
  const uint k8 = lane() * DOT_VEC;
  float k_hat[DOT_VEC], q_hat[DOT_VEC];  // the lane's run of k̂ and q̂ (past dk: a real word, not used)
  [[unroll]] for (uint e = 0u; e < DOT_VEC; ++e) {
    k_hat[e] = uintBitsToFloat(shared_word(s.dk + min(k8 + e, s.dk - 1u)));
    q_hat[e] = uintBitsToFloat(shared_word(min(k8 + e, s.dk - 1u)));
  }
  for (uint first = 0u; first < s.dv; first += warps()) {
    const uint j = first + warp();
    const bool valid = j < s.dv;
    const uint count = valid ? octet_count(k8, s.dk) : 0u;
    Words row = Words(row_address(state, h * s.dv + min(j, s.dv - 1u), 4u));
    precise float x[DOT_VEC];
    [[unroll]] for (uint e = 0u; e < DOT_VEC; ++e) x[e] = e < count ? uintBitsToFloat(row.w[k8 + e]) : 0.0;
    precise float m = 0.0;
    [[unroll]] for (uint e = 0u; e < DOT_VEC; ++e) {
      if (e < count) {
        x[e] = x[e] * decay;
        m = m + x[e] * k_hat[e];
      }
    }
    precise float delta = (uintBitsToFloat(shared_word(2u * s.dk + min(j, s.dv - 1u))) - warp_sum(m)) * beta;
    precise float o = 0.0;
    [[unroll]] for (uint e = 0u; e < DOT_VEC; ++e) {
      if (e < count) {
        x[e] = x[e] + k_hat[e] * delta;
        o = o + x[e] * q_hat[e];
        row.w[k8 + e] = floatBitsToUint(x[e]);
      }
    }
    precise float out_j = warp_sum(o);
    if (valid && lane() == 0u) set_shared_word(gdn_o_word(s) + j, f32_to_bf16(out_j) << 16);
  }
}

// The gated RMSNorm of head h's output o (ops/gdn.h gated_rms_norm) into out, an invocation an
// element: t = r(w · r(o · inv)) (a standard RMSNorm, 1/rms from every warp's canonical dot),
// out = r(t · silu(z)). Call in uniform control flow.
void gdn_gated_norm(Task t, GdnShape s, uint h) {
  const uint o = gdn_o_word(s), n = gl_WorkGroupSize.x;
  precise float inv = rms_inverse(shared_dot(o, o, s.dv), s.dv);
  ConstHalves w = ConstHalves(load_view(t.operand[4]).addr);
  Halves z = Halves(load_view(t.operand[0]).addr + 2ul * (s.C + h * s.dv));
  Halves dst = Halves(load_view(t.operand[7]).addr + 2ul * h * s.dv);
  for (uint j = 0u; j < trips(s.dv, n); ++j) {
    const uint d = j * n + invocation();
    if (d >= s.dv) continue;
    const uint y = rms_norm_element(uintBitsToFloat(shared_word(o + d)), inv, bf16_to_f32(uint(w.h[d])), SP_NORM_STANDARD);
    precise float gated = bf16_to_f32(y) * pm_silu(bf16_to_f32(uint(z.h[d])));
    dst.h[d] = uint16_t(f32_to_bf16(gated));
  }
}

// Operands: 0 proj [q, k, v channels | z | b | a], 1 conv weights, 2 A_log, 3 dt_bias, 4 norm
// weights, 5 conv rings, 6 state, 7 out. A head reuses the previous one's shared words past
// barriers that every invocation reaches only after reading them: q, k and v are last read
// before the norm's barrier, o before the next head's conv's.
void run_gdn(Task t) {
  const GdnShape s = gdn_shape(t);
  const uint position = step_state().w[SP_STATE_position];
  const View state = load_view(t.operand[6]);
  for (uint h = s.head; h < s.head + s.heads; ++h) {
    gdn_conv(t, s, h, position);
    float beta, decay;
    gdn_gates(t, s, h, beta, decay);
    gdn_l2_norms(s);
    gdn_rows(state, s, h, beta, decay);
    sync_shared();  // every row's o is in shared memory
    gdn_gated_norm(t, s, h);
  }
}

uint cost_gdn(Task t) {
  const GdnShape s = gdn_shape(t);
  const uint n = gl_WorkGroupSize.x;
  const uint head = 1u + trips(2u * s.dk + s.dv, n) + 2u * trips(s.dk, DOT_BLOCK) + trips(2u * s.dk, n) +
                    trips(s.dv, warps()) + trips(s.dv, DOT_BLOCK) + trips(s.dv, n);
  return s.heads * head;
}

#endif

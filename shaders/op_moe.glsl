// The MoE tiles (ops/moe.h, docs/numerics.md "MoE"), bit for bit the CPU reference's: the
// router's rows are a GEMV's into f32 logits, every gate-and-up task routes the token from them
// (the one of tile 0 also stores the routing); the routed experts' gate-and-up and down rows are
// the projections' warp dots (op_projection.glsl) over the rows of the experts the routing
// names, found as the tile runs, and EXPERT_DOWN_SHARED's shared expert adds its gated row's dot to the routed sum (the
// EXPERT_DOWN tile with a flag, as CUDA's kSharedToo). The tiles keep 32-bit words in g_vecs after
// what they stage (the host sizes it for them: tasks/op_decls.cpp).
#ifndef SP_OP_MOE_GLSL
#define SP_OP_MOE_GLSL

// The task's MoE record (SpMoeParams), named by its operand k.
struct MoeParams {
  uint experts, slots, expert_rows;
  bool normalise;
};

MoeParams moe_params(Task t, uint k) {
  const uint record = t.operand[k];
  return MoeParams(op_param(record, SP_MOE_experts), op_param(record, SP_MOE_slots),
                   op_param(record, SP_MOE_expert_rows), (op_param(record, SP_MOE_flags) & SP_MOE_NORMALISE) != 0u);
}

// ops/moe.h routes_before: whether expert i's logit a comes before expert j's b in the choice,
// the larger first, the lower expert on a tie, a NaN after every number.
bool routes_before(float a, uint i, float b, uint j) {
  if (is_nan(a) || is_nan(b)) return is_nan(b) && (!is_nan(a) || i < j);
  return a > b || (a == b && i < j);
}

// The token's choice (ops/moe.h route), in shared words from word `at` on: the E logits, then
// the k chosen experts. Each invocation places its experts (route_place: a count of the experts
// that route before it, so the places are a permutation and each of the first k is written
// once). Call in uniform control flow; the experts are readable on return.
void route_experts(uint64_t logits_addr, uint at, MoeParams p) {
  const uint E = p.experts, k = p.slots, n = gl_WorkGroupSize.x;
  Words logits = Words(logits_addr);
  for (uint j = 0u; j < trips(E, n); ++j) {
    const uint e = j * n + invocation();
    if (e < E) set_shared_word(at + e, logits.w[e]);
  }
  sync_shared();
  for (uint j = 0u; j < trips(E, n); ++j) {
    const uint e = min(j * n + invocation(), E - 1u);  // past the last expert: places it again, writes nothing
    const float logit = uintBitsToFloat(shared_word(at + e));
    uint place = 0u;
    for (uint i = 0u; i < E; ++i) place += routes_before(uintBitsToFloat(shared_word(at + i)), i, logit, e) ? 1u : 0u;
    if (j * n + invocation() < E && place < k) set_shared_word(at + E + place, e);
  }
  sync_shared();
}

// Chosen expert s of route_experts' words from `at` on.
uint routed_expert(uint at, MoeParams p, uint s) { return shared_word(at + p.experts + s); }

// After route_experts: the softmax's sums of the k slots' weights (ops/moe.h route), the logits
// turned into exp(logit − top) in place: {route_sum in expert order, route_slot_weight's of the
// chosen in choice order}. Every invocation sums them alike, since a loop over shared memory
// must take the same trips in all of them (workgroup.glsl). Call in uniform control flow.
vec2 route_sums(uint at, MoeParams p) {
  const uint E = p.experts, k = p.slots, n = gl_WorkGroupSize.x;
  const float top = uintBitsToFloat(shared_word(at + routed_expert(at, p, 0u)));  // the first chosen's logit
  sync_shared();  // read by every invocation before the logits are replaced
  for (uint j = 0u; j < trips(E, n); ++j) {
    const uint e = j * n + invocation();
    if (e < E) {
      precise float x = uintBitsToFloat(shared_word(at + e)) - top;
      set_shared_word(at + e, floatBitsToUint(pm_exp(x)));
    }
  }
  sync_shared();
  precise float sum = 0.0;
  for (uint e = 0u; e < E; ++e) {
    precise float next = sum + uintBitsToFloat(shared_word(at + e));
    sum = next;
  }
  precise float chosen_sum = 0.0;
  for (uint s = 0u; s < k; ++s) {
    precise float next = chosen_sum + exact_div(uintBitsToFloat(shared_word(at + routed_expert(at, p, s))), sum);
    chosen_sum = next;
  }
  return vec2(sum, chosen_sum);
}

// Chosen expert s's weight rounded to bf16, as the bits the routing holds (ops/moe.h route).
uint route_slot_weight_bits(uint at, MoeParams p, uint s, vec2 sums) {
  precise float prob = exact_div(uintBitsToFloat(shared_word(at + routed_expert(at, p, s))), sums.x);
  precise float weight = p.normalise ? exact_div(prob, sums.y) : prob;
  return f32_to_bf16(weight) << 16;
}

// After route_experts: invocation 0 writes the k slots {expert, weight} to `routing_addr`. Call in
// uniform control flow.
void route_weights(uint at, MoeParams p, uint64_t routing_addr) {
  const vec2 sums = route_sums(at, p);
  Words routing = Words(routing_addr);
  for (uint s = 0u; s < p.slots; ++s) {
    const uint weight = route_slot_weight_bits(at, p, s, sums);
    if (invocation() == 0u) {
      routing.w[2u * s] = routed_expert(at, p, s);
      routing.w[2u * s + 1u] = weight;
    }
  }
}

uint cost_route(MoeParams p) {
  return trips(p.experts, gl_WorkGroupSize.x) * (p.experts + 3u) + p.experts + 2u * p.slots;
}

// The router's rows as a GEMV's: into f32 logits, without residual, argmax partial or split.
Task router_rows(Task t) {
  Task rows = t;
  rows.operand[4] = SP_NO_VIEW;
  rows.operand[5] = 0u;
  rows.operand[7] = 0u;
  return rows;
}

// Operands: 0 W, 1 x, 2 norm, 3 logits, 4 params. The routing is the gate-and-up tasks'.
void run_router(Task t) { run_gemv(router_rows(t)); }

uint cost_router(Task t) { return cost_gemv(router_rows(t)); }

// Stages the k routing slots {expert, weight bits} as shared words from word `at` on, and checks
// every slot's expert below E before any routed row is read (a graph whose routing no
// gate-and-up task writes would read past the fused weights): where one is not, the first such
// slot is reported, as ops/run_task.h routing_slots throws, and every invocation gets false.
// Call in uniform control flow.
bool stage_routing(uint64_t routing, uint at, MoeParams p) {
  Words slots = Words(routing);
  for (uint j = 0u; j < trips(2u * p.slots, gl_WorkGroupSize.x); ++j) {
    const uint i = j * gl_WorkGroupSize.x + invocation();
    if (i < 2u * p.slots) set_shared_word(at + i, slots.w[i]);
  }
  sync_shared();
  uint bad = p.slots;
  for (uint s = 0u; s < p.slots; ++s)
    if (bad == p.slots && shared_word(at + 2u * s) >= p.experts) bad = s;
  if (bad == p.slots) return true;
  fail_task(SP_FAIL_EXPERT_RANGE, shared_word(at + 2u * bad), p.experts, bad);
  return false;
}

uint cost_stage_routing(MoeParams p) { return trips(2u * p.slots, gl_WorkGroupSize.x) + p.slots; }

// Slot s's expert and weight, staged from word `at` on.
uint slot_expert(uint at, uint s) { return shared_word(at + 2u * s); }
float slot_weight(uint at, uint s) { return uintBitsToFloat(shared_word(at + 2u * s + 1u)); }

// Operands: 0 W (expert e's gate rows e·2Im .., its up rows Im further), 1 x, 2 norm, 3 routing
// (written by the task of tile 0, before its rows, as CUDA's), 4 act, 5 params, 6 the router's
// logits. The token routed (route_experts) in words after the input's octets; tile t is row
// t % Im of slot t / Im, a warp's tiles taken as run_gate_up takes its rows.
void run_expert_gate_up(Task t) {
  const MoeParams p = moe_params(t, 5u);
  const View W = load_view(t.operand[0]), act = load_view(t.operand[4]);
  const uint H = W.cols, Im = p.expert_rows, at = 4u * trips(H, DOT_VEC);
  const bool vec = vec_readable(W.addr, W.stride, H);
  stage_input(load_view(t.operand[1]).addr, load_view(t.operand[2]).addr, H);
  route_experts(load_view(t.operand[6]).addr, at, p);
  if (t.tile_begin == 0u) route_weights(at, p, load_view(t.operand[3]).addr);
  for (uint first = t.tile_begin; first < t.tile_end; first += warps()) {
    // a warp past the last tile reads the last again and writes nothing
    const uint tile = min(first + warp(), t.tile_end - 1u), s = tile / Im, r = tile % Im;
    const uint64_t gate = row_address(W, routed_expert(at, p, s) * 2u * Im + r, 2u);
    const uint64_t rows[DOT_ROWS] = uint64_t[](gate, gate + 2ul * Im * W.stride);
    const uint y = swiglu_rows(rows, 0u, H, vec);
    if (first + warp() < t.tile_end && lane() == 0u) Halves(row_address(act, s, 2u)).h[r] = uint16_t(y);
  }
}

// GATE_UP's loops (its operands 0, the rows, are the same) and the routing's.
uint cost_expert_gate_up(Task t) { return cost_gate_up(t) + cost_route(moe_params(t, 5u)); }

// Elements of g_vecs a slot's activation row takes (whole octets).
uint slot_row_elements(uint Im) { return DOT_VEC * trips(Im, DOT_VEC); }

// The k slots' activation rows of act [k, Im] into g_vecs from octet `at` on, slot s's at
// octet at + s · trips(Im, DOT_VEC) (zero past Im). Call in uniform control flow.
void stage_slot_rows(View act, uint Im, uint k, uint at) {
  const uint octets = trips(Im, DOT_VEC), n = k * octets;
  const bool vec = vec_readable(act.addr, act.stride, Im);
  for (uint j = 0u; j < trips(n, gl_WorkGroupSize.x); ++j) {
    const uint i = j * gl_WorkGroupSize.x + invocation();
    if (i < n) g_vecs[at + i] = data8(row_address(act, i / octets, 2u), DOT_VEC * (i % octets), Im, vec);
  }
  sync_shared();
}

// r(sigmoid(logit)) of the shared expert's gate logit (EXPERT_DOWN_SHARED's operand 7).
precise float shared_expert_gate(Task t) {
  return rounded(pm_sigmoid(bf16_to_f32(uint(Halves(load_view(t.operand[7]).addr).h[0]))));
}

// The shared expert's term added to the routed sums f of the warp's row group g
// (EXPERT_DOWN_SHARED's operand 5, its down rows, each the row of hidden it adds to; its
// activations staged from element `base`): f = r(f + r(gate · r(Ŵs_r · act))) (ops/moe.h
// add_shared_expert). Call in uniform control flow.
void add_shared_expert(Task t, uint g, uint base, float gate, inout float f[DOT_ROWS]) {
  const View Ws = load_view(t.operand[5]);
  uint r[DOT_ROWS];
  uint64_t rows[DOT_ROWS];
  warp_rows(Ws, t, g, r, rows);
  float acc[DOT_ROWS];
  lane_dot_rows(rows, base, Ws.cols, vec_readable(Ws.addr, Ws.stride, Ws.cols), acc);
  [[unroll]] for (uint i = 0u; i < DOT_ROWS; ++i) {
    precise float term = gate * rounded(warp_sum(acc[i]));
    precise float sum = f[i] + rounded(term);
    f[i] = rounded(sum);
  }
}

// Operands: 0 W (expert e's down rows e·H ..), 1 act, 2 routing, 3 hidden (in place), 4 params;
// with `with_shared` (EXPERT_DOWN_SHARED) also 5 the shared expert's down rows, 6 its
// activations, 7 its gate's logit. A warp's rows as warp_rows gives them (run_gemv's); for each,
// the slots' dots in slot order, m = Σ r(w_s · r(y_s)) from 0, f = r(m) (with the shared
// expert's term added), and hidden = r(hidden + f). The shared expert's activations follow the
// slots' rows, the slots them.
void expert_down_tiles(Task t, bool with_shared) {
  const MoeParams p = moe_params(t, 4u);
  const View W = load_view(t.operand[0]);
  const uint Im = p.expert_rows, H = W.rows / p.experts, Is = with_shared ? load_view(t.operand[5]).cols : 0u;
  const uint shared_at = p.slots * slot_row_elements(Im), at = (shared_at + slot_row_elements(Is)) / 2u;
  const bool vec = vec_readable(W.addr, W.stride, Im);
  stage_slot_rows(load_view(t.operand[1]), Im, p.slots, 0u);
  if (with_shared) stage_slot_rows(load_view(t.operand[6]), Is, 1u, shared_at / DOT_VEC);
  if (!stage_routing(load_view(t.operand[2]).addr, at, p)) return;
  const float gate = with_shared ? shared_expert_gate(t) : 0.0;
  Halves hidden = Halves(load_view(t.operand[3]).addr);
  for (uint g = 0u; g < warp_row_groups(t); ++g) {
    uint r[DOT_ROWS];
    uint64_t first[DOT_ROWS];  // expert 0's rows; expert e's are e · H rows further
    warp_rows(W, t, g, r, first);
    float m[DOT_ROWS];
    [[unroll]] for (uint i = 0u; i < DOT_ROWS; ++i) m[i] = 0.0;
    for (uint s = 0u; s < p.slots; ++s) {
      const uint64_t offset = 2ul * uint64_t(slot_expert(at, s) * H) * W.stride;
      uint64_t rows[DOT_ROWS];
      [[unroll]] for (uint i = 0u; i < DOT_ROWS; ++i) rows[i] = first[i] + offset;
      float acc[DOT_ROWS];
      lane_dot_rows(rows, s * slot_row_elements(Im), Im, vec, acc);
      [[unroll]] for (uint i = 0u; i < DOT_ROWS; ++i) {
        precise float weighted = slot_weight(at, s) * rounded(warp_sum(acc[i]));
        precise float sum = m[i] + rounded(weighted);
        m[i] = sum;
      }
    }
    float f[DOT_ROWS];
    [[unroll]] for (uint i = 0u; i < DOT_ROWS; ++i) f[i] = rounded(m[i]);
    if (with_shared) add_shared_expert(t, g, shared_at, gate, f);
    [[unroll]] for (uint i = 0u; i < DOT_ROWS; ++i) {
      if (r[i] < t.tile_end && lane() == 0u) {
        precise float sum = bf16_to_f32(uint(hidden.h[r[i]])) + f[i];
        hidden.h[r[i]] = uint16_t(f32_to_bf16(sum));
      }
    }
  }
}

void run_expert_down(Task t) { expert_down_tiles(t, false); }
void run_expert_down_shared(Task t) { expert_down_tiles(t, true); }

uint cost_expert_down(Task t) {
  const MoeParams p = moe_params(t, 4u);
  const uint rows = trips(p.slots * trips(p.expert_rows, DOT_VEC), gl_WorkGroupSize.x);
  return rows + cost_stage_routing(p) +
         warp_row_groups(t) * p.slots * (trips(p.expert_rows, DOT_BLOCK * DOT_UNROLL) + 1u);
}

// EXPERT_DOWN's, the shared expert's activations staged and its dot a row.
uint cost_expert_down_shared(Task t) {
  const uint Is = load_view(t.operand[5]).cols;
  return cost_expert_down(t) + trips(trips(Is, DOT_VEC), gl_WorkGroupSize.x) +
         warp_row_groups(t) * (trips(Is, DOT_BLOCK * DOT_UNROLL) + 1u);
}

// Operands: 0 W (the piece's columns of expert e's down rows e·H .., row stride Im), 1 act (the
// piece's columns of every slot's activations), 2 the router's logits, 3 partials, 4 params,
// 5 the piece j. The slots' activation rows of the piece staged, the token routed from the
// logits (route_experts) in words after them; a warp's rows as warp_rows gives them, and for
// each, each slot's dot over the piece into column s·H + r of partial row j, f32 (ops/moe.h
// expert_down_piece_rows). The params' held experts are a device's share of a graph over
// several devices, which this executor does not run.
void run_expert_down_piece(Task t) {
  const MoeParams p = moe_params(t, 4u);
  const View W = load_view(t.operand[0]), partials = load_view(t.operand[3]);
  const uint P = W.cols, H = W.rows / p.experts, j = t.operand[5], at = p.slots * slot_row_elements(P) / 2u;
  const bool vec = vec_readable(W.addr, W.stride, P);
  stage_slot_rows(load_view(t.operand[1]), P, p.slots, 0u);
  route_experts(load_view(t.operand[2]).addr, at, p);
  Words partial = Words(partials.addr);
  for (uint g = 0u; g < warp_row_groups(t); ++g) {
    uint r[DOT_ROWS];
    uint64_t first[DOT_ROWS];  // expert 0's rows; expert e's are e · H rows further
    warp_rows(W, t, g, r, first);
    for (uint s = 0u; s < p.slots; ++s) {
      const uint64_t offset = 2ul * uint64_t(routed_expert(at, p, s) * H) * W.stride;
      uint64_t rows[DOT_ROWS];
      [[unroll]] for (uint i = 0u; i < DOT_ROWS; ++i) rows[i] = first[i] + offset;
      float acc[DOT_ROWS];
      lane_dot_rows(rows, s * slot_row_elements(P), P, vec, acc);
      [[unroll]] for (uint i = 0u; i < DOT_ROWS; ++i) {
        precise float d = warp_sum(acc[i]);
        if (r[i] < t.tile_end && lane() == 0u) partial.w[j * partials.stride + s * H + r[i]] = floatBitsToUint(d);
      }
    }
  }
}

uint cost_expert_down_piece(Task t) {
  const MoeParams p = moe_params(t, 4u);
  const uint P = load_view(t.operand[0]).cols;
  return trips(p.slots * trips(P, DOT_VEC), gl_WorkGroupSize.x) + cost_route(p) +
         warp_row_groups(t) * p.slots * (trips(P, DOT_BLOCK * DOT_UNROLL) + 1u);
}

// Operands: 0 partials [S, k·H], 1 the router's logits, 2 hidden (in place), 3 params, 4 split,
// 5 the shared expert's down rows (bf16) or its down dots' pieces (f32) or none, 6 its
// activations (with its rows), 7 its gate's logit. Its activations staged (with its rows), the
// token routed and weighed from the logits in words after them (route_experts, route_sums),
// the slots' weights after those; for each of a warp's rows (warp_rows' order), each slot's
// pieces summed as the split sums them, m = Σ r(w_s · r(y_s)) from 0 in slot order, f = r(m),
// the shared expert's term added (from its rows' dots, or its pieces summed as the params'
// shared_split says, else as the slots'), and hidden = r(hidden + f) (ops/moe.h
// expert_down_sum_rows).
void run_expert_down_sum(Task t) {
  const MoeParams p = moe_params(t, 3u);
  const View partials = load_view(t.operand[0]);
  const uint H = partials.cols / p.slots;
  const uvec2 split = gemv_split_of(t.operand[4]);
  const bool with_shared = t.operand[5] != SP_NO_VIEW;
  const View Ws = with_shared ? load_view(t.operand[5]) : partials;
  const bool shared_rows = with_shared && Ws.dtype == SP_BF16;
  const uint shared_split_word = op_param(t.operand[3], SP_MOE_shared_split);
  const uvec2 shared_split = gemv_split_of(shared_split_word != 0u ? shared_split_word : t.operand[4]);
  const uint at = shared_rows ? slot_row_elements(Ws.cols) / 2u : 0u, weights = at + p.experts + p.slots;
  if (shared_rows) stage_slot_rows(load_view(t.operand[6]), Ws.cols, 1u, 0u);
  route_experts(load_view(t.operand[1]).addr, at, p);
  const vec2 sums = route_sums(at, p);
  for (uint s = 0u; s < p.slots; ++s) {
    const uint weight = route_slot_weight_bits(at, p, s, sums);
    if (invocation() == 0u) set_shared_word(weights + s, weight);
  }
  sync_shared();
  const float gate = with_shared ? shared_expert_gate(t) : 0.0;
  Halves hidden = Halves(load_view(t.operand[2]).addr);
  for (uint g = 0u; g < warp_row_groups(t); ++g) {
    uint r[DOT_ROWS];
    float f[DOT_ROWS];
    [[unroll]] for (uint i = 0u; i < DOT_ROWS; ++i) {
      r[i] = t.tile_begin + warp() + (g * DOT_ROWS + i) * warps();
      const uint row = min(r[i], t.tile_end - 1u);  // a row past the task's last is read again, not written
      precise float m = 0.0;
      for (uint s = 0u; s < p.slots; ++s) {
        precise float weighted = uintBitsToFloat(shared_word(weights + s)) *
                                 rounded(pieces_sum(Words(partials.addr), s * H + row, partials.stride, split));
        precise float next = m + rounded(weighted);
        m = next;
      }
      f[i] = rounded(m);
      if (with_shared && !shared_rows) {
        precise float term = gate * rounded(pieces_sum(Words(Ws.addr), row, Ws.stride, shared_split));
        precise float sum = f[i] + rounded(term);
        f[i] = rounded(sum);
      }
    }
    if (shared_rows) add_shared_expert(t, g, 0u, gate, f);
    [[unroll]] for (uint i = 0u; i < DOT_ROWS; ++i) {
      if (r[i] < t.tile_end && lane() == 0u) {
        precise float sum = bf16_to_f32(uint(hidden.h[r[i]])) + f[i];
        hidden.h[r[i]] = uint16_t(f32_to_bf16(sum));
      }
    }
  }
}

uint cost_expert_down_sum(Task t) {
  const MoeParams p = moe_params(t, 3u);
  uint staged = 0u, group = 1u, row = p.slots * (gemv_split_of(t.operand[4]).x + 1u);  // a row: each slot's pieces
  if (t.operand[5] != SP_NO_VIEW) {
    const View Ws = load_view(t.operand[5]);
    if (Ws.dtype == SP_BF16) {  // its activations staged, its rows' dots a group
      staged = trips(trips(Ws.cols, DOT_VEC), gl_WorkGroupSize.x);
      group += trips(Ws.cols, DOT_BLOCK * DOT_UNROLL) + 1u;
    } else {
      row += Ws.rows + 1u;  // its pieces
    }
  }
  return cost_route(p) + p.slots + staged + warp_row_groups(t) * (group + DOT_ROWS * row);
}

#endif

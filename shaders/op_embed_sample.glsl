// EMBED (a copy of the token's row) and SAMPLE (greedy: the argmax over the partial slots,
// which notes logits that are not finite in the step state (ops/sample.h); the forced token
// while the prompt lasts, else the argmax's; then the step state advances).
#ifndef SP_OP_EMBED_SAMPLE_GLSL
#define SP_OP_EMBED_SAMPLE_GLSL

// Operands: 0 table [V, H], 1 out [H].
void run_embed(Task t) {
  const uint token = step_state().w[SP_STATE_token];
  const View table = load_view(t.operand[0]);
  if (token >= table.rows) {
    fail_task(SP_FAIL_TOKEN_RANGE, token, table.rows);
    return;
  }
  ConstHalves row = ConstHalves(row_address(table, token, 2u));
  Halves dst = Halves(load_view(t.operand[1]).addr);
  for (uint j = 0u; j < trips(t.tile_end - t.tile_begin, gl_WorkGroupSize.x); ++j) {
    const uint c = t.tile_begin + j * gl_WorkGroupSize.x + invocation();
    if (c < t.tile_end) dst.h[c] = row.h[c];
  }
}

uint cost_embed(Task t) { return trips(t.tile_end - t.tile_begin, gl_WorkGroupSize.x); }

// Operands: 0 logits, 1 argmax partials, 2 imm partial count, 3 forced tokens, 4 out tokens.
// Invocation 0 alone; the host refuses temperature > 0.
void run_sample(Task t) {
  if (invocation() != 0u) return;
  Words state = step_state();
  const uint s = state.w[SP_STATE_step], max_steps = param(SP_PARAMS_max_steps);
  if (s >= max_steps) {
    fail_task(SP_FAIL_STEP_RANGE, s, max_steps);
    return;
  }
  Words partials = Words(load_view(t.operand[1]).addr);
  float best_value = uintBitsToFloat(partials.w[0]);
  uint best_index = partials.w[1];
  for (uint slot = 1u; slot < t.operand[2]; ++slot)
    argmax_offer(best_value, best_index, uintBitsToFloat(partials.w[2u * slot]), partials.w[2u * slot + 1u]);
  if (is_nan(best_value) && state.w[SP_STATE_nonfinite_step] == 0u) state.w[SP_STATE_nonfinite_step] = s + 1u;
  const bool forced = s + 1u < state.w[SP_STATE_forced_count];
  const uint next = forced ? Words(load_view(t.operand[3]).addr).w[s + 1u] : best_index;
  Words(load_view(t.operand[4]).addr).w[s] = next;
  state.w[SP_STATE_token] = next;
  state.w[SP_STATE_position] += 1u;
  state.w[SP_STATE_step] = s + 1u;
}

uint cost_sample(Task t) { return t.operand[2]; }

#endif

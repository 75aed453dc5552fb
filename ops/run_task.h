// The CPU tile dispatch: resolves a task's operand views (tasks/opcodes.h) and runs the
// array-level function of its opcode over tiles [tile_begin, tile_end).
#pragma once
#include <stdint.h>

#include <string>

#include "ops/attention.h"
#include "ops/context.h"
#include "ops/embed.h"
#include "ops/gdn.h"
#include "ops/gemv.h"
#include "ops/mlp.h"
#include "ops/moe.h"
#include "ops/sample.h"
#include "tasks/error.h"
#include "tasks/gdn_shape.h"

namespace spindle {

[[noreturn]] inline void throw_task_error(const SpTask& t, const std::string& what) {
  const char* name = sp_opcode_name(t.op);
  throw Error(std::string(name ? name : "task") + " (layer " + std::to_string(int32_t(t.layer)) +
              ", tiles " + std::to_string(t.tile_begin) + ".." + std::to_string(t.tile_end) +
              "): " + what);
}

// Operand i's data, or nullptr for SP_NO_VIEW.
template <class T>
T* operand_data(const SpTask& t, const TileContext& c, uint32_t i) {
  return t.operand[i] == SP_NO_VIEW ? nullptr : view_data<T>(c, t.operand[i]);
}

inline const SpView& operand_view(const SpTask& t, const TileContext& c, uint32_t i) {
  return c.views[t.operand[i]];
}

inline void check_position(const SpTask& t, const TileContext& c) {
  if (c.state->position >= c.params->context)
    throw_task_error(t, "position " + std::to_string(c.state->position) +
                            " is past the KV capacity of " + std::to_string(c.params->context));
}

template <class Acc>
void run_embed(const SpTask& t, const TileContext& c) {
  const SpView& table = operand_view(t, c, 0);
  const uint32_t token = c.state->token;
  if (token >= table.rows)
    throw_task_error(t, "token " + std::to_string(token) + " is not below the table's " +
                            std::to_string(table.rows) + " rows");
  embed_columns(operand_data<const bf16>(t, c, 0), table.row_stride, token, t.tile_begin,
                t.tile_end, operand_data<bf16>(t, c, 1));
}

template <class Acc>
void run_gemv(const SpTask& t, const TileContext& c) {
  const SpView& W = operand_view(t, c, 0);
  const NormSpec norm{operand_data<const bf16>(t, c, 2), c.params->norm_kind, c.params->rms_eps};
  const uint32_t flags = t.operand[5];
  ArgmaxPartial* argmax = nullptr;
  if (flags & 1u) {
    if (t.operand[6] == SP_NO_VIEW) throw_task_error(t, "the argmax flag is set but no partials view");
    argmax = operand_data<ArgmaxPartial>(t, c, 6) + (flags >> 16);
  }
  const bf16* w = operand_data<const bf16>(t, c, 0);
  const bf16* x = operand_data<const bf16>(t, c, 1);
  const bf16* residual = operand_data<const bf16>(t, c, 4);
  if (const char* problem = gemv_split_problem(t.operand[7], W.cols)) throw_task_error(t, problem);
  const GemvSplit split = gemv_split(t.operand[7]);
  switch (operand_view(t, c, 3).dtype) {
    case SP_BF16:
      return gemv_rows<Acc>(w, W.row_stride, x, W.cols, norm, t.tile_begin, t.tile_end,
                            operand_data<bf16>(t, c, 3), residual, argmax, split);
    case SP_F32:
      return gemv_rows<Acc>(w, W.row_stride, x, W.cols, norm, t.tile_begin, t.tile_end,
                            operand_data<float>(t, c, 3), residual, argmax, split);
    default:
      throw_task_error(t, "the output is neither bf16 nor f32");
  }
}

template <class Acc>
void run_gemv_piece(const SpTask& t, const TileContext& c) {
  if (const char* problem = gemv_piece_problem(t, c.views)) throw_task_error(t, problem);
  const SpView& W = operand_view(t, c, 0);
  const GemvPiece piece = gemv_piece(t);
  gemv_piece_rows<Acc>(operand_data<const bf16>(t, c, 0), W.row_stride, operand_data<const bf16>(t, c, 1), W.cols,
                       t.tile_begin, t.tile_end, operand_data<float>(t, c, 4), operand_view(t, c, 4).row_stride, piece,
                       operand_data<uint32_t>(t, c, 5)[piece.word], operand_data<bf16>(t, c, 2),
                       operand_data<const bf16>(t, c, 3));
}

template <class Acc>
void run_piece_dots(const SpTask& t, const TileContext& c) {
  const SpView &W = operand_view(t, c, 0), &partials = operand_view(t, c, 2);
  piece_dot_rows<Acc>(operand_data<const bf16>(t, c, 0), W.row_stride, operand_data<const bf16>(t, c, 1), W.cols,
                      t.tile_begin, t.tile_end, operand_data<float>(t, c, 2) + size_t(t.operand[3]) * partials.row_stride);
}

template <class Acc>
void run_piece_sum(const SpTask& t, const TileContext& c) {
  piece_sum_rows<Acc>(operand_data<const float>(t, c, 0), operand_view(t, c, 0).row_stride, gemv_split(t.operand[3]),
                      t.tile_begin, t.tile_end, operand_data<bf16>(t, c, 1), operand_data<const bf16>(t, c, 2));
}

template <class Acc>
void run_gate_up(const SpTask& t, const TileContext& c) {
  const SpView& Wg = operand_view(t, c, 0);
  const NormSpec norm{operand_data<const bf16>(t, c, 3), c.params->norm_kind, c.params->rms_eps};
  gate_up_rows<Acc>(operand_data<const bf16>(t, c, 0), operand_data<const bf16>(t, c, 1),
                    Wg.row_stride, operand_data<const bf16>(t, c, 2), Wg.cols, norm,
                    t.tile_begin, t.tile_end, operand_data<bf16>(t, c, 4));
}

// ATTENTION's tiles, or with `gated` GATED_ATTENTION's (the same operands).
template <class Acc>
void attention_tiles(const SpTask& t, const TileContext& c, bool gated) {
  check_position(t, c);
  const SpGraphParams& p = *c.params;
  const uint32_t position = c.state->position;
  const AttentionArgs a{
      operand_data<const bf16>(t, c, 0), operand_data<const bf16>(t, c, 1),
      operand_data<const bf16>(t, c, 2), operand_data<bf16>(t, c, 3), operand_view(t, c, 3).row_stride,
      operand_data<const bf16>(t, c, 4) + size_t(position) * operand_view(t, c, 4).row_stride,
      operand_data<float>(t, c, 5), operand_view(t, c, 5).row_stride, operand_data<bf16>(t, c, 6),
      operand_data<uint32_t>(t, c, 7), p.n_heads, p.n_kv_heads, p.head_dim, p.rotary_dim, p.context,
      p.attn_chunks, p.attn_q_splits, p.attn_kv_share, position, p.norm_kind, p.rms_eps, gated};
  for (uint32_t tile = t.tile_begin; tile < t.tile_end; ++tile) attention_tile<Acc>(a, tile);
}

template <class Acc>
void run_attention(const SpTask& t, const TileContext& c) {
  attention_tiles<Acc>(t, c, false);
}

template <class Acc>
void run_gated_attention(const SpTask& t, const TileContext& c) {
  attention_tiles<Acc>(t, c, true);
}

// The sizes follow from the views (tasks/gdn_shape.h), which validate() checked. A gang runs
// whole (tasks/gang.h): rank 0's record runs its head, the other ranks' nothing.
template <class Acc>
void run_gdn(const SpTask& t, const TileContext& c) {
  if (sp_gang_width(t) > 1 && t.gang_rank != 0) return;
  const GdnShape s = gdn_shape(t, c.views);
  const GdnArgs a{operand_data<const bf16>(t, c, 0),
                  operand_data<const bf16>(t, c, 1),
                  operand_view(t, c, 1).row_stride,
                  operand_data<const bf16>(t, c, 2),
                  operand_data<const bf16>(t, c, 3),
                  operand_data<const bf16>(t, c, 4),
                  operand_data<bf16>(t, c, 5),
                  operand_view(t, c, 5).row_stride,
                  operand_data<float>(t, c, 6),
                  operand_data<bf16>(t, c, 7),
                  s.Hk,
                  s.Hv,
                  s.dk,
                  s.dv,
                  s.Kc,
                  c.state->position,
                  c.params->rms_eps};
  for (uint32_t h = s.head; h < s.head + s.heads; ++h) gdn_head<Acc>(a, h);
}

template <class Acc>
void run_sample(const SpTask& t, const TileContext& c) {
  if (c.state->step >= c.params->max_steps)
    throw_task_error(t, "step " + std::to_string(c.state->step) + " is past the " +
                            std::to_string(c.params->max_steps) + " out-token slots");
  if (t.operand[2] == 0) throw_task_error(t, "no argmax partials");
  sample_step<Acc>(operand_data<const float>(t, c, 0), c.params->vocab,
                   operand_data<const ArgmaxPartial>(t, c, 1), t.operand[2],
                   operand_data<const uint32_t>(t, c, 3), operand_data<uint32_t>(t, c, 4),
                   *c.state);
}

// The CPU executors run a gang whole (tasks/gang.h): rank 0's record runs every member; the
// others' only wait and signal.
template <class Acc>
void run_mlp(const SpTask& t, const TileContext& c) {
  if (sp_gang_width(t) > 1 && t.gang_rank != 0) return;
  if (const char* problem = mlp_problem(t, c.views)) throw_task_error(t, problem);
  const MlpArgs a{operand_data<const bf16>(t, c, 0),
                  operand_data<const bf16>(t, c, 1),
                  operand_data<const bf16>(t, c, 2),
                  operand_view(t, c, 0).row_stride,
                  operand_view(t, c, 2).row_stride,
                  operand_data<bf16>(t, c, 3),
                  {operand_data<const bf16>(t, c, 4), c.params->norm_kind, c.params->rms_eps},
                  operand_data<float>(t, c, 5),
                  operand_view(t, c, 5).row_stride,
                  operand_data<uint32_t>(t, c, 6),
                  mlp_shape(t, operand_view(t, c, 2))};
  mlp_gang_whole<Acc>(a);
}

// The routing slots of operand k, each expert checked below E: a graph whose routing view no
// EXPERT_GATE_UP writes would otherwise read past the fused weights.
inline const RoutingSlot* routing_slots(const SpTask& t, const TileContext& c, uint32_t k, const SpMoeParams& p) {
  const RoutingSlot* slots = operand_data<const RoutingSlot>(t, c, k);
  for (uint32_t s = 0; s < p.slots; ++s)
    if (slots[s].expert >= p.experts)
      throw_task_error(t, "routing slot " + std::to_string(s) + " names expert " + std::to_string(slots[s].expert) +
                              ", not one of the " + std::to_string(p.experts) + " (does an expert_gate_up task write the routing?)");
  return slots;
}

template <class Acc>
void run_router(const SpTask& t, const TileContext& c) {
  const SpView& W = operand_view(t, c, 0);
  router_rows<Acc>(operand_data<const bf16>(t, c, 0), W.row_stride, operand_data<const bf16>(t, c, 1), W.cols,
                   {operand_data<const bf16>(t, c, 2), c.params->norm_kind, c.params->rms_eps}, t.tile_begin,
                   t.tile_end, operand_data<float>(t, c, 3));
}

template <class Acc>
void run_expert_gate_up(const SpTask& t, const TileContext& c) {
  const SpMoeParams& p = operand_params<SpMoeParams>(t, c, 5);  // validate() checked it
  const SpView& W = operand_view(t, c, 0);
  expert_gate_up_task<Acc>({operand_data<const bf16>(t, c, 0), W.row_stride, p.expert_rows},
                           operand_data<const bf16>(t, c, 1), W.cols,
                           {operand_data<const bf16>(t, c, 2), c.params->norm_kind, c.params->rms_eps},
                           operand_data<const float>(t, c, 6), p.experts, p.slots, p.flags & SP_MOE_NORMALISE,
                           t.tile_begin, t.tile_end, operand_data<bf16>(t, c, 4), operand_view(t, c, 4).row_stride,
                           operand_data<RoutingSlot>(t, c, 3), {p.held_first, p.held_count});
}

// The shared expert of EXPERT_DOWN_SHARED and EXPERT_DOWN_SUM: operands 5 (its down rows, or
// EXPERT_DOWN_SUM's f32 pieces of their dots, summed as `pieces_split` says), 6 (its
// activations, with the rows) and 7 (its gate's logit).
inline SharedExpert shared_expert(const SpTask& t, const TileContext& c, GemvSplit pieces_split = {}) {
  const SpView& v = operand_view(t, c, 5);
  const bf16 logit = *operand_data<const bf16>(t, c, 7);
  if (v.dtype == SP_F32)
    return {nullptr, 0, 0, nullptr, logit, operand_data<const float>(t, c, 5), v.row_stride, pieces_split};
  return {operand_data<const bf16>(t, c, 5), v.row_stride, v.cols, operand_data<const bf16>(t, c, 6), logit};
}

// EXPERT_DOWN's rows, and with `shared` EXPERT_DOWN_SHARED's (operands 5-7 the shared expert).
template <class Acc>
void expert_down_tiles(const SpTask& t, const TileContext& c, bool shared) {
  const SpMoeParams& p = operand_params<SpMoeParams>(t, c, 4);  // validate() checked it
  const SpView& W = operand_view(t, c, 0);
  const SharedExpert s = shared ? shared_expert(t, c) : SharedExpert{};
  expert_down_rows<Acc>(operand_data<const bf16>(t, c, 0), W.row_stride, W.rows / p.experts, p.expert_rows,
                        operand_data<const bf16>(t, c, 1), operand_view(t, c, 1).row_stride,
                        routing_slots(t, c, 2, p), p.slots, t.tile_begin, t.tile_end, operand_data<bf16>(t, c, 3),
                        shared ? &s : nullptr);
}

template <class Acc>
void run_expert_down(const SpTask& t, const TileContext& c) {
  expert_down_tiles<Acc>(t, c, false);
}

template <class Acc>
void run_expert_down_shared(const SpTask& t, const TileContext& c) {
  expert_down_tiles<Acc>(t, c, true);
}

// The token's routing from the router's logits in operand k, as EXPERT_GATE_UP routes it.
template <class Acc>
std::vector<RoutingSlot> routed_slots(const SpTask& t, const TileContext& c, uint32_t k, const SpMoeParams& p) {
  std::vector<RoutingSlot> slots(p.slots);
  route<Acc>(operand_data<const float>(t, c, k), p.experts, p.slots, p.flags & SP_MOE_NORMALISE, slots.data());
  return slots;
}

template <class Acc>
void run_expert_down_piece(const SpTask& t, const TileContext& c) {
  const SpMoeParams& p = operand_params<SpMoeParams>(t, c, 4);  // validate() checked it
  const SpView &W = operand_view(t, c, 0), &partials = operand_view(t, c, 3);
  expert_down_piece_rows<Acc>(operand_data<const bf16>(t, c, 0), W.row_stride, W.rows / p.experts, W.cols,
                              operand_data<const bf16>(t, c, 1), operand_view(t, c, 1).row_stride,
                              routed_slots<Acc>(t, c, 2, p).data(), p.slots, t.tile_begin, t.tile_end,
                              operand_data<float>(t, c, 3) + size_t(t.operand[5]) * partials.row_stride,
                              {p.held_first, p.held_count});
}

template <class Acc>
void run_expert_down_sum(const SpTask& t, const TileContext& c) {
  const SpMoeParams& p = operand_params<SpMoeParams>(t, c, 3);  // validate() checked it
  const SpView& partials = operand_view(t, c, 0);
  const bool shared = t.operand[5] != SP_NO_VIEW;
  const SharedExpert s = shared ? shared_expert(t, c, shared_pieces_split(t.operand[4], p)) : SharedExpert{};
  expert_down_sum_rows<Acc>(operand_data<const float>(t, c, 0), partials.row_stride, gemv_split(t.operand[4]),
                            partials.cols / p.slots, routed_slots<Acc>(t, c, 1, p).data(), p.slots, t.tile_begin,
                            t.tile_end, operand_data<bf16>(t, c, 2), shared ? &s : nullptr);
}

// Every op with a CPU tile (tasks/opcodes.h SP_OPS) runs its run_<name>.
template <class Acc>
void run_task(const SpTask& t, const TileContext& c) {
  switch (t.op) {
#define SP_CPU_CASE_(NAME, name, value, executors)     \
  case SP_OP_##NAME:                                   \
    if constexpr ((executors) & SP_ON_CPU) {           \
      return run_##name<Acc>(t, c);                    \
    } else {                                           \
      throw_task_error(t, "the op has no CPU tile");   \
    }
    SP_OPS(SP_CPU_CASE_)
#undef SP_CPU_CASE_
  }
  throw Error("unknown opcode " + std::to_string(t.op));
}

}  // namespace spindle

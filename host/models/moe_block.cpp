#include "host/models/moe_block.h"

#include <string>

#include "host/models/tensor_names.h"

namespace spindle {

MoeBlock::MoeBlock(GraphEmitter& e, const DecoderViews& v, bool normalise)
    : e_(e), v_(v), shared_(has_shared_expert(e.weights().config.family)) {
  const ModelConfig& c = e.weights().config;
  const uint32_t E = c.num_experts, k = c.experts_per_tok, Im = c.moe_intermediate;
  narrow(uint64_t(k) * Im, "the routed experts' rows, num_experts_per_tok × moe_intermediate_size");
  narrow(2 * uint64_t(E) * Im, "the fused gate and up rows, 2 × num_experts × moe_intermediate_size");
  narrow(uint64_t(E) * c.hidden, "the fused down rows, num_experts × hidden_size");
  params_ = e.add_params(SpMoeParams{E, k, Im, normalise ? SP_MOE_NORMALISE : 0u, {}});
  logits_ = e.alloc("router_logits", SP_ARENA_WORK, SP_F32, 1, E);
  routing_ = e.alloc("routing", SP_ARENA_WORK, SP_U32, 1, 2 * uint64_t(k));
  act_ = e.alloc("expert_act", SP_ARENA_WORK, SP_BF16, k, Im);
  if (!shared_) return;
  shared_act_ = e.alloc("shared_expert_act", SP_ARENA_WORK, SP_BF16, 1, c.shared_intermediate);
  shared_logit_ = e.alloc("shared_expert_gate_logit", SP_ARENA_WORK, SP_BF16, 1, 1);
}

void MoeBlock::tensors(const ModelConfig& c, uint32_t l, std::vector<TensorSpec>& out) {
  const uint64_t H = c.hidden, E = c.num_experts, Im = c.moe_intermediate;
  using namespace names;
  out.push_back({layer(l, kPostNorm), {H}});
  out.push_back({layer(l, kRouter), {E, H}});
  out.push_back({layer(l, kExpertsGateUp), {E, 2 * Im, H}});
  out.push_back({layer(l, kExpertsDown), {E, H, Im}});
  if (!has_shared_expert(c.family)) return;
  const uint64_t Is = c.shared_intermediate;
  out.push_back({layer(l, kSharedGate), {Is, H}});
  out.push_back({layer(l, kSharedUp), {Is, H}});
  out.push_back({layer(l, kSharedDown), {H, Is}});
  out.push_back({layer(l, kSharedExpertGate), {1, H}});
}

Stage MoeBlock::emit(uint32_t l, const Stage& prev) {
  using namespace names;
  const ModelConfig& c = e_.weights().config;
  const uint32_t H = c.hidden, E = c.num_experts, k = c.experts_per_tok, Im = c.moe_intermediate, h = v_.hidden;
  const std::string tag = layer_tag(l);
  const uint32_t post_norm = e_.weight(layer(l, kPostNorm), {H});
  const uint32_t router = e_.weight(layer(l, kRouter), {E, H});
  const uint32_t gate_up = e_.weight(layer(l, kExpertsGateUp), {E, 2 * uint64_t(Im), H});
  const uint32_t down = e_.weight(layer(l, kExpertsDown), {E, H, Im});

  // The router's tasks write its logits; every routed gate/up task routes from them (so that no
  // task's routing lies between the router's rows and the experts' rows), and the one of tile 0
  // stores the routing down reads. The shared expert's rows and gate join the router's stage,
  // after its tasks: they wait for the attention (`prev`) alone and stream while the router
  // runs, and the routed experts' stage is then theirs alone, which its tasks claim one a block
  // (a stage's quota is its tasks over the blocks), all starting once the logits are written.
  // Their buffers are safe to rewrite then: the last layer's down stage, their reader, ended
  // before this layer's attention began.
  Stage s_router = e_.begin_stage(tag + "router");
  e_.split(s_router, 0, E, e_.rows_per_task(E), [&](uint32_t r0, uint32_t r1) {
    e_.add_task(s_router, prev, SP_WAIT_SAME_STEP, SP_OP_ROUTER, l, r0, r1,
                {router, h, post_norm, logits_, params_});
  });
  uint32_t wd_shared = SP_NO_VIEW;
  if (shared_) {
    const uint32_t Is = c.shared_intermediate;
    const uint32_t wg = e_.weight(layer(l, kSharedGate), {Is, H});
    const uint32_t wu = e_.weight(layer(l, kSharedUp), {Is, H});
    const uint32_t w_gate = e_.weight(layer(l, kSharedExpertGate), {1, H});
    wd_shared = e_.weight(layer(l, kSharedDown), {H, Is});
    e_.split(s_router, 0, Is, e_.rows_per_task(Is), [&](uint32_t r0, uint32_t r1) {
      e_.add_task(s_router, prev, SP_WAIT_SAME_STEP, SP_OP_GATE_UP, l, r0, r1, {wg, wu, h, post_norm, shared_act_});
    });
    e_.gemv(s_router, prev, l, w_gate, 0, 1, 1, h, post_norm, shared_logit_, SP_NO_VIEW);
  }
  Stage s_gu = e_.begin_stage(tag + "expert_gate_up");
  const uint32_t slot_rows = k * Im;  // within 32 bits: checked above
  e_.split(s_gu, 0, slot_rows, e_.rows_per_task(slot_rows), [&](uint32_t t0, uint32_t t1) {
    e_.add_task(s_gu, s_router, SP_WAIT_SAME_STEP, SP_OP_EXPERT_GATE_UP, l, t0, t1,
                {gate_up, h, post_norm, routing_, act_, params_, logits_});
  });
  Stage s_down = e_.begin_stage(tag + "expert_down");
  e_.split(s_down, 0, H, e_.rows_per_task(H), [&](uint32_t r0, uint32_t r1) {
    if (shared_)
      e_.add_task(s_down, s_gu, SP_WAIT_SAME_STEP, SP_OP_EXPERT_DOWN_SHARED, l, r0, r1,
                  {down, act_, routing_, h, params_, wd_shared, shared_act_, shared_logit_});
    else
      e_.add_task(s_down, s_gu, SP_WAIT_SAME_STEP, SP_OP_EXPERT_DOWN, l, r0, r1, {down, act_, routing_, h, params_});
  });
  return s_down;
}

}  // namespace spindle

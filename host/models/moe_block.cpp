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
  const BuildOptions& opt = e.options();
  const GemvSplit shared_asked = opt.shared_down_split.pieces ? opt.shared_down_split : opt.expert_down_split;
  e.check_split(opt.expert_down_split, Im, "expert down");
  if (shared_) e.check_split(shared_asked, c.shared_intermediate, "shared expert down");
  const uint32_t N = opt.devices, flags = normalise ? SP_MOE_NORMALISE : 0u;
  if (N > 1) {
    const std::string over = " over " + std::to_string(N) + " devices,";
    if (!opt.expert_parallel) e.check_split({N, N}, Im, ("expert down" + over).c_str());
    if (shared_) e.check_split({N, N}, c.shared_intermediate, ("shared expert down" + over).c_str());
  }
  if (opt.expert_parallel && E % N)
    throw Error("expert parallel over " + std::to_string(N) + " devices: a device holds whole experts, and the " +
                std::to_string(E) + " experts (num_experts) do not split evenly over them");
  const auto one_device = [](GemvSplit s) { return gemv_split(gemv_split_word(s.pieces, s.group)); };
  down_split_ = opt.expert_parallel ? GemvSplit{} : N > 1 ? GemvSplit{N, N} : one_device(opt.expert_down_split);
  if (shared_) shared_split_ = N > 1 ? GemvSplit{N, N} : one_device(shared_asked);
  const uint32_t shared_word = gemv_split_word(shared_split_.pieces, shared_split_.group);
  params_ = e.add_params(SpMoeParams{E, k, Im, flags, 0, 0, shared_word, 0});
  for (uint32_t d = 0; d < N && opt.expert_parallel; ++d)
    held_params_.push_back(e.add_params(SpMoeParams{E, k, Im, flags, d * (E / N), E / N, shared_word, 0}));
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
    // Over devices (expert parallel too) device d computes rows [d Is/N, (d+1) Is/N), the
    // columns of its piece of the shared down.
    const uint32_t N = e_.graph().devices;
    for (uint32_t d = 0; d < N; ++d) {
      if (N > 1) e_.on_device(d);
      e_.split(s_router, d * (Is / N), (d + 1) * (Is / N), e_.rows_per_task(Is / N), [&](uint32_t r0, uint32_t r1) {
        e_.add_task(s_router, prev, SP_WAIT_SAME_STEP, SP_OP_GATE_UP, l, r0, r1, {wg, wu, h, post_norm, shared_act_});
      });
    }
    e_.on_device(Graph::kEveryDevice);
    e_.gemv(s_router, prev, l, w_gate, 0, 1, 1, h, post_norm, shared_logit_, SP_NO_VIEW);
  }
  // The routed experts' gate and up rows; over N devices device d computes rows [d Im/N,
  // (d+1) Im/N) of every slot's expert, or expert parallel every row of the slots whose expert
  // it holds (its tasks span every slot's rows and skip the others).
  const uint32_t N = e_.graph().devices, P = held_params_.empty() ? Im / N : Im;
  const uint32_t slot_runs = N > 1 && held_params_.empty() ? k : 1;
  Stage s_gu = e_.begin_stage(tag + "expert_gate_up");
  for (uint32_t d = 0; d < N; ++d)
    for (uint32_t s = 0; s < slot_runs; ++s) {
      if (N > 1) e_.on_device(d);
      const uint32_t t0 = slot_runs > 1 ? s * Im + d * P : 0, t1 = slot_runs > 1 ? t0 + P : k * Im;  // within 32 bits: checked above
      const uint32_t params = held_params_.empty() ? params_ : held_params_[d];
      e_.split(s_gu, t0, t1, e_.rows_per_task(k * P), [&](uint32_t r0, uint32_t r1) {
        e_.add_task(s_gu, s_router, SP_WAIT_SAME_STEP, SP_OP_EXPERT_GATE_UP, l, r0, r1,
                    {gate_up, h, post_norm, routing_, act_, params, logits_});
      });
    }
  e_.on_device(Graph::kEveryDevice);
  if (down_split_.pieces > 1 || !held_params_.empty() || shared_split_.pieces > 1)
    return emit_down_pieces(l, s_gu, down, wd_shared);
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

// The down dots in pieces of Im / S columns (EXPERT_DOWN_PIECE; S = 1 where the shared
// expert's alone are split), over N devices piece d on device d into symmetric partials
// signalling every device, or expert parallel each device's slots' whole dots into the one
// partial row, then their sum into the residual on every device (EXPERT_DOWN_SUM), with the
// shared expert's rows or pieces where there is one.
Stage MoeBlock::emit_down_pieces(uint32_t l, const Stage& s_gu, uint32_t down, uint32_t wd_shared) {
  const ModelConfig& c = e_.weights().config;
  const uint32_t H = c.hidden, k = c.experts_per_tok, S = down_split_.pieces, P = c.moe_intermediate / S;
  const uint32_t N = e_.graph().devices, h = v_.hidden, per = e_.rows_per_task(H);
  const std::string tag = layer_tag(l);
  // A view a layer: over devices, an exchange's partials are written again only a step later
  // (GraphEmitter::row_parallel says why).
  const uint32_t partials = e_.alloc(tag + "expert_down_partials", N > 1 ? SP_ARENA_SYMMETRIC : SP_ARENA_WORK,
                                     SP_F32, S, uint64_t(k) * H);
  Stage s_pieces = e_.begin_stage(tag + "expert_down", N > 1);
  const bool expert_parallel = !held_params_.empty();
  for (uint32_t i = 0; i < (expert_parallel ? N : S); ++i) {
    if (N > 1) e_.on_device(i);
    const uint32_t j = expert_parallel ? 0 : i, params = expert_parallel ? held_params_[i] : params_;
    const std::string piece = ".piece" + std::to_string(j);
    const uint32_t w_j = S > 1 ? e_.columns(down, e_.graph().view_names[down] + piece, uint64_t(j) * P, P) : down;
    const uint32_t act_j = S > 1 ? e_.columns(act_, "expert_act" + piece, uint64_t(j) * P, P) : act_;
    e_.split(s_pieces, 0, H, per, [&](uint32_t r0, uint32_t r1) {
      e_.add_task(s_pieces, s_gu, SP_WAIT_SAME_STEP, SP_OP_EXPERT_DOWN_PIECE, l, r0, r1,
                  {w_j, act_j, logits_, partials, params, j});
    });
  }
  // The shared expert's down split as shared_split_ says: its dots' pieces (PIECE_DOTS) into
  // partials of their own, piece j on device j over devices, which the sum adds as that split
  // sums them (the record's shared_split).
  uint32_t shared_down = shared_ ? wd_shared : SP_NO_VIEW, shared_act = shared_ ? shared_act_ : SP_NO_VIEW;
  if (shared_ && shared_split_.pieces > 1) {
    const uint32_t Ss = shared_split_.pieces, Ps = c.shared_intermediate / Ss;
    shared_down = e_.alloc(tag + "shared_down_partials", N > 1 ? SP_ARENA_SYMMETRIC : SP_ARENA_WORK, SP_F32, Ss, H);
    shared_act = SP_NO_VIEW;
    for (uint32_t j = 0; j < Ss; ++j) {
      if (N > 1) e_.on_device(j);
      const std::string piece = ".piece" + std::to_string(j);
      const uint32_t w_j = e_.columns(wd_shared, e_.graph().view_names[wd_shared] + piece, uint64_t(j) * Ps, Ps);
      const uint32_t act_j = e_.slice(shared_act_, "shared_expert_act" + piece, uint64_t(j) * Ps, Ps);
      e_.split(s_pieces, 0, H, per, [&](uint32_t r0, uint32_t r1) {
        e_.add_task(s_pieces, s_gu, SP_WAIT_SAME_STEP, SP_OP_PIECE_DOTS, l, r0, r1, {w_j, act_j, shared_down, j});
      });
    }
  }
  e_.on_device(Graph::kEveryDevice);
  Stage s_sum = e_.begin_stage(tag + "expert_down.sum");
  e_.split(s_sum, 0, H, per, [&](uint32_t r0, uint32_t r1) {
    e_.add_task(s_sum, s_pieces, SP_WAIT_SAME_STEP, SP_OP_EXPERT_DOWN_SUM, l, r0, r1,
                {partials, logits_, h, params_, gemv_split_word(S, down_split_.group), shared_down, shared_act,
                 shared_ ? shared_logit_ : SP_NO_VIEW});
  });
  return s_sum;
}

}  // namespace spindle

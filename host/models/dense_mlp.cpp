#include "host/models/dense_mlp.h"

#include <string>

#include "host/models/tensor_names.h"

namespace spindle {

DenseMlp::DenseMlp(GraphEmitter& e, const DecoderViews& v, uint32_t intermediate)
    : e_(e), v_(v), I_(intermediate) {
  const BuildOptions& opt = e.options();
  const uint32_t H = e.weights().config.hidden;
  e.check_split(opt.down_split, I_, "down");
  if (opt.devices > 1)
    e.check_split({opt.devices, opt.devices}, I_, ("down over " + std::to_string(opt.devices) + " devices,").c_str());
  e.check_split(opt.fused_mlp, I_, "fused MLP");
  fused_ = gemv_split(gemv_split_word(opt.fused_mlp.pieces, opt.fused_mlp.group));
  if (fused_.pieces > 1 && opt.down_split.pieces > 1)
    throw Error("the fused MLP sums down's dots itself (as a down split pieces/group); a down split does not apply");
  if (fused_.group > 255)
    throw Error("fused MLP gangs of " + std::to_string(fused_.group) + ": at most 255 members a gang");
  if (fused_.pieces > 1) {
    partials_ = e.alloc("mlp_partials", SP_ARENA_WORK, SP_F32, uint64_t(fused_.pieces) + fused_.pieces / fused_.group, H);
    arrivals_ = e.alloc("mlp_arrivals", SP_ARENA_WORK, SP_U32, 1, fused_.group);
  } else {
    act_ = e.alloc("act", SP_ARENA_WORK, SP_BF16, 1, I_);
  }
}

void DenseMlp::tensors(const ModelConfig& c, uint32_t l, std::vector<TensorSpec>& out) {
  const uint64_t H = c.hidden, I = c.intermediate;
  using namespace names;
  out.push_back({layer(l, kPostNorm), {H}});
  out.push_back({layer(l, kMlpGate), {I, H}});
  out.push_back({layer(l, kMlpUp), {I, H}});
  out.push_back({layer(l, kMlpDown), {H, I}});
}

Stage DenseMlp::emit(uint32_t l, const Stage& prev) {
  using namespace names;
  const uint32_t H = e_.weights().config.hidden, h = v_.hidden;
  const std::string tag = layer_tag(l);
  const uint32_t post_norm = e_.weight(layer(l, kPostNorm), {H});
  const uint32_t wg = e_.weight(layer(l, kMlpGate), {I_, H});
  const uint32_t wu = e_.weight(layer(l, kMlpUp), {I_, H});
  const uint32_t wd = e_.weight(layer(l, kMlpDown), {H, I_});
  if (fused_.pieces > 1) {
    Stage s_mlp = e_.begin_stage(tag + "mlp");
    const uint32_t P = I_ / fused_.pieces;
    for (uint32_t j = 0; j < fused_.pieces; ++j) {
      e_.add_task(s_mlp, prev, SP_WAIT_SAME_STEP, SP_OP_MLP, l, j * P, (j + 1) * P,
                  {wg, wu, wd, h, post_norm, partials_, arrivals_});
      e_.graph().tasks.back().gang_width = uint8_t(fused_.group);
      e_.graph().tasks.back().gang_rank = uint8_t(fused_.group > 1 ? j % fused_.group : 0);
    }
    return s_mlp;
  }
  // Over N devices, device d computes rows [d I/N, (d+1) I/N) of gate and up, and down is
  // row-parallel over those columns.
  const uint32_t N = e_.graph().devices, P = I_ / N;
  Stage s_gu = e_.begin_stage(tag + "gate_up");
  for (uint32_t d = 0; d < N; ++d) {
    if (N > 1) e_.on_device(d);
    e_.split(s_gu, d * P, (d + 1) * P, e_.rows_per_task(P), [&](uint32_t r0, uint32_t r1) {
      e_.add_task(s_gu, prev, SP_WAIT_SAME_STEP, SP_OP_GATE_UP, l, r0, r1, {wg, wu, h, post_norm, act_});
    });
  }
  e_.on_device(Graph::kEveryDevice);
  if (N > 1) return e_.row_parallel(tag + "down", s_gu, l, wd, act_, h, h);
  Stage s_down = e_.begin_stage(tag + "down");
  e_.gemv(s_down, s_gu, l, wd, 0, H, e_.rows_per_task(H), act_, SP_NO_VIEW, h, h, e_.options().down_split);
  return s_down;
}

}  // namespace spindle

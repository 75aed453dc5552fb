#include "host/models/gdn_block.h"

#include <algorithm>
#include <string>
#include <utility>

#include "host/models/tensor_names.h"

namespace spindle {

GdnBlock::GdnBlock(GraphEmitter& e, const DecoderViews& v) : e_(e), v_(v) {
  const ModelConfig& c = e.weights().config;
  Hk_ = c.linear_num_key_heads;
  Hv_ = c.linear_num_value_heads;
  dk_ = c.linear_key_head_dim;
  dv_ = c.linear_value_head_dim;
  Kc_ = c.linear_conv_kernel;
  Ck_ = narrow(uint64_t(Hk_) * dk_, "linear_num_key_heads × linear_key_head_dim");
  Cv_ = narrow(uint64_t(Hv_) * dv_, "linear_num_value_heads × linear_value_head_dim");
  C_ = narrow(2 * uint64_t(Ck_) + Cv_, "the conv's channels, 2 × key heads × key dim + value heads × value dim");
  gang_ = e.options().gdn_gang ? e.options().gdn_gang : gdn_gang_for(Hv_, dv_);
  if (gang_ > 255 || dv_ % gang_)
    throw Error("GDN gangs of " + std::to_string(gang_) + " (--tune gdn-gang): not a divisor of the value head size " +
                std::to_string(dv_) + " of at most 255 members");
  const BuildOptions& opt = e.options();
  e.check_split(opt.gdn_out_split, Cv_, "GDN out_proj");
  if (opt.devices > 1) {
    if (Hk_ % opt.devices)
      throw Error(std::to_string(opt.devices) + " devices: a device holds whole GDN key heads with their value "
                  "heads, and the model's " + std::to_string(Hk_) + " (linear_num_key_heads) do not split evenly over "
                  "them");
    e.check_split({opt.devices, opt.devices}, Cv_,
                  ("GDN out_proj over " + std::to_string(opt.devices) + " devices,").c_str());
  }
  // The projections [q, k, v channels | z | b | a], then the exchange of a gang run at once.
  proj_ = e.alloc("gdn_proj", SP_ARENA_WORK, SP_BF16, 1, uint64_t(C_) + 2 * uint64_t(Cv_) + 2 * uint64_t(Hv_));
  out_ = e.alloc("gdn_out", SP_ARENA_WORK, SP_BF16, 1, Cv_);
}

void GdnBlock::tensors(const ModelConfig& c, uint32_t l, std::vector<TensorSpec>& out) {
  using namespace names;
  const uint64_t H = c.hidden, Hv = c.linear_num_value_heads, dv = c.linear_value_head_dim;
  const uint64_t Ck = uint64_t(c.linear_num_key_heads) * c.linear_key_head_dim, Cv = Hv * dv, C = 2 * Ck + Cv;
  out.push_back({layer(l, kInputNorm), {H}});
  if (c.family == Family::Qwen3Next) {
    out.push_back({layer(l, kGdnQkvz), {2 * Ck + 2 * Cv, H}});
    out.push_back({layer(l, kGdnBa), {2 * Hv, H}});
  } else {
    out.push_back({layer(l, kGdnQkv), {C, H}});
    out.push_back({layer(l, kGdnZ), {Cv, H}});
    out.push_back({layer(l, kGdnB), {Hv, H}});
    out.push_back({layer(l, kGdnA), {Hv, H}});
  }
  out.push_back({layer(l, kGdnConv), {C, 1, c.linear_conv_kernel}});
  out.push_back({layer(l, kGdnDtBias), {Hv}});
  out.push_back({layer(l, kGdnALog), {Hv}});
  out.push_back({layer(l, kGdnNorm), {dv}});
  out.push_back({layer(l, kGdnOut), {H, Cv}});
}

// Where each input projection's rows land in the projections [q | k | v | z | b | a]:
// Qwen3.5's four matrices whole; Qwen3-Next's two fused ones a key head g at a time, whose rows
// hold g's q, k, then its r = Hv/Hk value heads' v and z (in_proj_qkvz), their b and a
// (in_proj_ba) (spec §4.1).
std::vector<GdnBlock::Segment> GdnBlock::segments(uint32_t l) {
  using namespace names;
  const uint32_t H = e_.weights().config.hidden, z_at = C_, b_at = C_ + Cv_, a_at = b_at + Hv_;
  if (e_.weights().config.family != Family::Qwen3Next) {
    return {{e_.weight(layer(l, kGdnQkv), {C_, H}), 0, C_, 0},
            {e_.weight(layer(l, kGdnZ), {Cv_, H}), 0, Cv_, z_at},
            {e_.weight(layer(l, kGdnB), {Hv_, H}), 0, Hv_, b_at},
            {e_.weight(layer(l, kGdnA), {Hv_, H}), 0, Hv_, a_at}};
  }
  const uint32_t r = Hv_ / Hk_, rv = r * dv_, seg = 2 * dk_ + 2 * rv;  // within C_ + Cv_
  const uint32_t qkvz = e_.weight(layer(l, kGdnQkvz), {uint64_t(C_) + Cv_, H});
  const uint32_t ba = e_.weight(layer(l, kGdnBa), {2 * uint64_t(Hv_), H});
  std::vector<Segment> s;
  for (uint32_t g = 0; g < Hk_; ++g) {
    s.push_back({qkvz, g * seg, dk_, g * dk_});
    s.push_back({qkvz, g * seg + dk_, dk_, Ck_ + g * dk_});
    s.push_back({qkvz, g * seg + 2 * dk_, rv, 2 * Ck_ + g * rv});
    s.push_back({qkvz, g * seg + 2 * dk_ + rv, rv, z_at + g * rv});
    s.push_back({ba, g * 2 * r, r, b_at + g * r});
    s.push_back({ba, g * 2 * r + r, r, a_at + g * r});
  }
  return s;
}

Stage GdnBlock::emit(uint32_t l, const Stage& prev) {
  using namespace names;
  const uint32_t H = e_.weights().config.hidden, h = v_.hidden;
  const std::string tag = layer_tag(l);
  const uint32_t in_norm = e_.weight(layer(l, kInputNorm), {H});
  const uint32_t conv_w = e_.weight(layer(l, kGdnConv), {C_, 1, Kc_});
  const uint32_t dt_bias = e_.weight(layer(l, kGdnDtBias), {Hv_});
  const uint32_t A_log = e_.weight(layer(l, kGdnALog), {Hv_});
  const uint32_t norm = e_.weight(layer(l, kGdnNorm), {dv_});
  const uint32_t w_out = e_.weight(layer(l, kGdnOut), {H, Cv_});
  const uint32_t conv_state = e_.alloc(tag + "gdn_conv_state", SP_ARENA_RECURRENT, SP_BF16, C_, Kc_);
  const uint32_t state = e_.alloc(tag + "gdn_state", SP_ARENA_RECURRENT, SP_F32, Cv_, dk_);

  // The input projections. Over N devices, device d computes the channels of its key heads
  // [d Hk/N, (d+1) Hk/N) and of their value heads: its share of each of q, k, v, z, b and a.
  const uint32_t N = e_.graph().devices;
  std::vector<std::pair<uint32_t, uint32_t>> share;  // device 0's, each range [begin, end) of the projections
  if (N == 1) share = {{0, C_ + Cv_ + 2 * Hv_}};
  else
    for (const auto& [at, width] : {std::pair{0u, Ck_}, {Ck_, Ck_}, {2 * Ck_, Cv_}, {C_, Cv_}, {C_ + Cv_, Hv_},
                                   {C_ + Cv_ + Hv_, Hv_}})
      share.push_back({at, at + width / N});
  struct Projection {
    Segment s;
    uint32_t w, out;
  };
  std::vector<Projection> projections;
  for (const Segment& s : segments(l)) {
    const std::string name = e_.graph().view_names[s.weight] + ".rows" + std::to_string(s.w_row);
    const uint32_t w = s.w_row ? e_.rows(s.weight, name, s.w_row, s.rows) : s.weight;
    projections.push_back({s, w, e_.slice(proj_, "gdn_proj.at" + std::to_string(s.at), s.at, s.rows)});
  }
  Stage s_in = e_.begin_stage(tag + "gdn_in");
  const uint32_t per = e_.rows_per_task((C_ + Cv_ + 2 * Hv_) / N);
  for (uint32_t d = 0; d < N; ++d) {
    if (N > 1) e_.on_device(d);
    for (const Projection& p : projections)
      for (const auto& [begin, end] : share) {
        const uint32_t offset = (end - begin) * d;  // a range of device d is device 0's moved on
        const uint32_t r0 = std::max(begin + offset, p.s.at), r1 = std::min(end + offset, p.s.at + p.s.rows);
        if (r0 < r1) e_.gemv(s_in, prev, l, p.w, r0 - p.s.at, r1 - p.s.at, per, h, in_norm, p.out, SP_NO_VIEW);
      }
  }

  // The value heads' tasks, over N devices device d's heads [d Hv/N, (d+1) Hv/N).
  Stage s_gdn = e_.begin_stage(tag + "gdn");
  auto add = [&](uint32_t row0, uint32_t row1) {
    e_.add_task(s_gdn, s_in, SP_WAIT_SAME_STEP, SP_OP_GDN, l, row0, row1,
                {proj_, conv_w, A_log, dt_bias, norm, conv_state, state, out_});
  };
  const uint32_t device_heads = Hv_ / N;
  for (uint32_t d = 0; d < N; ++d) {
    if (N > 1) e_.on_device(d);
    const uint32_t first = d * device_heads * dv_, last = (d + 1) * device_heads * dv_;
    if (gang_ > 1) {
      const uint32_t member = dv_ / gang_;
      for (uint32_t r0 = first; r0 < last; r0 += member) {
        add(r0, r0 + member);
        e_.graph().tasks.back().gang_width = uint8_t(gang_);
        e_.graph().tasks.back().gang_rank = uint8_t(r0 % dv_ / member);
      }
    } else {
      const uint32_t heads_per_task = uint32_t(ceil_div(device_heads, std::max(1u, e_.options().stage_tasks)));
      e_.split(s_gdn, d * device_heads, (d + 1) * device_heads, heads_per_task,
               [&](uint32_t h0, uint32_t h1) { add(h0 * dv_, h1 * dv_); });
    }
  }
  e_.on_device(Graph::kEveryDevice);

  if (N > 1) return e_.row_parallel(tag + "out_proj", s_gdn, l, w_out, out_, h, h);
  Stage s_out = e_.begin_stage(tag + "out_proj");
  e_.gemv(s_out, s_gdn, l, w_out, 0, H, e_.rows_per_task(H), out_, SP_NO_VIEW, h, h, e_.options().gdn_out_split);
  return s_out;
}

}  // namespace spindle

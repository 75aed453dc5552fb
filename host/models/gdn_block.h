// The Gated DeltaNet (linear attention) block of the hybrid families (spec §4): the normed
// hidden state's input projections (q, k and v channels, z, b, a), the GDN tasks (conv, gates,
// L2 norms, the delta rule on the recurrent state, the gated RMSNorm: a task a value head, or a
// gang a head, BuildOptions::gdn_gang), and out_proj added into the residual. Three stages a
// layer.
#pragma once
#include <cstdint>
#include <vector>

#include "host/models/family.h"

namespace spindle {

class GdnBlock {
 public:
  // Allocates the buffers every layer's block shares.
  GdnBlock(GraphEmitter& e, const DecoderViews& v);
  // Layer l's block, waiting for `prev`; returns its out_proj stage.
  Stage emit(uint32_t l, const Stage& prev);

  // Layer l's tensors (its input norm included), appended to `out`.
  static void tensors(const ModelConfig& c, uint32_t l, std::vector<TensorSpec>& out);

 private:
  // Rows [w_row, w_row + rows) of an input projection, written at `at` in the projections.
  struct Segment {
    uint32_t weight, w_row, rows, at;
  };
  std::vector<Segment> segments(uint32_t l);

  GraphEmitter& e_;
  DecoderViews v_;
  uint32_t Hk_, Hv_, dk_, dv_, Kc_, Ck_, Cv_, C_;
  uint32_t gang_;  // members of a value head's GDN gang, 1 for none
  uint32_t proj_, out_;
};

}  // namespace spindle

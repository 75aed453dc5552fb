// The graph's memory on the device: every arena (STATE, WORK, KV, CONST, the weights), the
// params, the view table, the table of arena bases the tiles index and the op parameter
// records, bound as a TileContext.
#pragma once
#include <cstdint>
#include <vector>

#include "host/model_weights.h"
#include "megakernel/device_buffer.h"
#include "ops/context.h"
#include "tasks/graph.h"

namespace spindle {
struct SyntheticPlan;
}

namespace spindle::cuda {

// Writes a synthetic preset's whole weight arena (plan.arena_bytes of device memory at
// `arena`, 16-byte aligned) on the device: every tensor from synth::value and the padding
// zeroed, the same bytes make_synthetic(…, SyntheticFill::Host) gives. Returns when done.
// (megakernel/synthetic_fill.cu)
void generate_synthetic(const SyntheticPlan& plan, uint8_t* arena);

class DeviceModel {
 public:
  // Puts the weights on the device, uploads the RoPE table and zeroes WORK and KV. Synthetic
  // weights (source "synthetic:…") are generated on the device from their plan, whether or
  // not `w` holds them on the host; a checkpoint's are uploaded. Throws spindle::Error when
  // the weights do not match the graph's arenas, a checkpoint's are not in host memory, or
  // the device runs out of memory.
  DeviceModel(const Graph& g, const ModelWeights& w);

  TileContext context() const;
  uint8_t* arena(uint32_t id) const { return arenas_[id].data(); }

 private:
  std::vector<DeviceBuffer> arenas_;  // by SpArena / weight arena id
  DeviceBuffer params_, views_, bases_, op_params_;
};

}  // namespace spindle::cuda

// The graph's memory on the device: every arena (STATE, WORK, KV, CONST, the weights), the
// params, the view table and the table of arena bases the tiles index, bound as a TileContext.
#pragma once
#include <cstdint>
#include <vector>

#include "host/model_weights.h"
#include "megakernel/device_buffer.h"
#include "ops/context.h"
#include "tasks/graph.h"

namespace spindle::cuda {

class DeviceModel {
 public:
  // Uploads the weights and the RoPE table and zeroes WORK and KV. Throws spindle::Error when
  // the weights do not match the graph's arenas or the device runs out of memory.
  DeviceModel(const Graph& g, const ModelWeights& w);

  TileContext context() const;
  uint8_t* arena(uint32_t id) const { return arenas_[id].data(); }

 private:
  std::vector<DeviceBuffer> arenas_;  // by SpArena / weight arena id
  DeviceBuffer params_, views_, bases_;
};

}  // namespace spindle::cuda

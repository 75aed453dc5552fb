// The weights a device's tasks may read, whatever the token and the routing: what a device of
// a graph split over several (docs/multi-device.md) must hold of each weight arena, from each
// op's declared weight rows (tasks/op_decls.h OpDecl::weight_rows).
#pragma once
#include <cstdint>
#include <vector>

#include "tasks/byte_ranges.h"
#include "tasks/graph.h"

namespace spindle {

struct WeightShard {
  // Of each weight arena (arena SP_ARENA_WEIGHTS0 + i), the byte ranges read: sorted, apart.
  std::vector<std::vector<ByteRange>> arenas;
  uint64_t bytes() const;
};

// Device d's shard of graph g (every task of a graph of one device: what the graph reads of
// its weights).
WeightShard device_weight_shard(const Graph& g, uint32_t device);

}  // namespace spindle

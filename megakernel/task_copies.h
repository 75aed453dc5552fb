// Which weights the persistent kernel copies into shared memory for each task, resolved on the
// host once, so that the kernel's two-hop build starts a copy with a few instructions before the
// task's wait. The plain build applies the same rule for projections on the device
// (tile_projection.cuh start_weight_preload), which measured faster there.
#pragma once
#include <cstdint>

#include "megakernel/device_records.h"
#include "tasks/graph.h"

namespace spindle::cuda {

struct CopyLimits {
  uint64_t projection_bytes;  // a projection task's weights up to this size; 0: no copies at all
  uint64_t smem;              // the most dynamic shared memory a launch may have
  bool mlp_members;           // MLP gang members run at once with their gangs: only then copied
};

// Task t's copy (bytes 0: none): a projection's rows when preload_end_bytes allows them within
// the limits, a ganged MLP member's gate rows, up rows and piece-major down block when
// mlp_preload_end does (tile_layout.h); only weight arenas, each span starting 16-byte aligned
// as the copy engine needs, and spans that add up to the layout's bytes.
TaskCopy task_copy(const Graph& g, const SpTask& t, const CopyLimits& limits);

}  // namespace spindle::cuda

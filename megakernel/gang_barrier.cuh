// The barrier among a gang's members between two phases, when the persistent kernel runs the
// members at once, each in its own block (tasks/gang.h). The gang's word counts arrivals and
// is never reset: after barrier b of step s it holds width * (barriers_per_step * s + b + 1).
#pragma once
#include <stdint.h>

#include "megakernel/counter_wait.cuh"
#include "megakernel/device_failure.cuh"

namespace spindle::cuda {

struct GangBarrier {
  uint32_t* word;         // the gang's: DeviceGraph::gang_counters at its rank-0 record; null: none
  uint32_t width, rank;
  uint32_t first_target;  // the word's value after the step's first barrier
  Backoff backoff;
};

// Whether the task's gang runs at once, each member in its own block. Passed by value with a
// null word when not, rather than as a pointer that may be null: a pointer to the dispatch's
// local made ptxas keep it in local memory, 10 stores a task.
__device__ inline bool ganged(const GangBarrier& gb) { return gb.word != nullptr; }

// Every thread of a member's block: its writes of phase b, released, then the others', acquired.
// False when the run was aborted or the wait outlived the watchdog (which thread 0 reports).
__device__ inline bool gang_barrier(const GangBarrier& gb, uint32_t b, const TaskSite& site) {
  __shared__ uint32_t s_met;
  __syncthreads();
  if (threadIdx.x == 0) {
    const uint32_t target = gb.first_target + b * gb.width;
    uint32_t value = DeviceAtomic(*gb.word).fetch_add(1u, kAcqRel) + 1u;
    s_met = sp_counter_reached(value, target) ||
            poll_until(*gb.word, target, value, gb.backoff, site.control,
                       {kFailGangWatchdog, site.task, site.step, gb.rank, 0, target});
  }
  __syncthreads();
  return s_met;
}

}  // namespace spindle::cuda

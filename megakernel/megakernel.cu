#include "megakernel/megakernel.h"

#include "megakernel/cuda_check.h"
#include "megakernel/device_atomic.cuh"
#include "megakernel/device_failure.cuh"
#include "megakernel/run_device_task.cuh"
#include "megakernel/weight_prefetch.cuh"
#include "tasks/counters.h"

namespace spindle::cuda {
namespace {

// Back-off between polls of a counter: short enough that a released waiter starts within a
// fraction of a typical tile, long enough that a hundred pollers leave the L2 alone.
constexpr uint32_t kFirstSleepNs = 32;
constexpr uint32_t kMaxSleepNs = 256;

// A claim on a task: a ticket (dynamic schedule) or an index into the block's static list,
// over all `steps` of the launch, decoded when the block gets to it.
constexpr uint64_t kNoClaim = ~uint64_t(0);

struct Claimed {
  bool valid;
  uint32_t task, step;
};

// Thread 0. `next_static` counts the block's static-list entries claimed so far.
__device__ uint64_t claim_task(const DeviceGraph& g, uint64_t& next_static) {
  if (g.list_begin) return next_static++;
  // A task only waits on tasks with smaller tickets, claimed by blocks that run them before
  // any ticket they claim later, so holding a claim ahead cannot deadlock.
  return atomicAdd(&g.control->ticket, 1ull);
}

__device__ Claimed decode_claim(const DeviceGraph& g, const MegakernelLaunch& l, uint64_t claim) {
  uint32_t begin = 0, len = g.n_tasks;
  if (g.list_begin) {
    begin = g.list_begin[blockIdx.x];
    len = g.list_begin[blockIdx.x + 1] - begin;
  }
  if (claim == kNoClaim || claim >= uint64_t(l.steps) * len) return {false, 0, 0};
  const uint32_t index = uint32_t(claim % len);
  return {true, g.list_begin ? g.list_tasks[begin + index] : index, l.first_step + uint32_t(claim / len)};
}

// Thread 0: waits until the task's counter reaches its target for `step` (acquire), backing
// off with __nanosleep. False when the run was aborted or this wait outlived the watchdog,
// which it then reports.
__device__ bool wait_for_task(const DeviceGraph& g, const MegakernelLaunch& l, uint32_t task, uint32_t step) {
  const SpTask& t = g.tasks[task];
  if (t.wait_counter == SP_NO_COUNTER) return true;
  const uint32_t target = sp_wait_target(t, step);
  DeviceAtomic counter(g.counters[t.wait_counter]);
  uint32_t value = counter.load(kAcquire);
  if (sp_counter_reached(value, target)) return true;
  const uint64_t start = global_timer_ns();
  for (uint32_t sleep_ns = kFirstSleepNs;; sleep_ns = min(2 * sleep_ns, kMaxSleepNs)) {
    __nanosleep(sleep_ns);
    value = counter.load(kAcquire);
    if (sp_counter_reached(value, target)) return true;
    if (run_aborted(g.control)) return false;
    if (global_timer_ns() - start > l.watchdog_ns) {
      report_failure(g.control, {kFailWatchdog, task, step, t.wait_counter, value, target});
      return false;
    }
  }
}

// Each block runs the tasks it claims, in claim order. With claim_ahead it claims its next task
// before running the current one, so the claim's latency overlaps the tile; with
// prefetch_bytes it sends the start of a claimed task's weights towards L2 before waiting on
// the task's counter.
template <int MinBlocksPerSm>
__global__ void __launch_bounds__(kBlockThreads, MinBlocksPerSm) persistent_kernel(DeviceGraph g, MegakernelLaunch l) {
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ Claimed s_task;
  __shared__ uint32_t s_ready;
  uint64_t next_static = 0, claim = 0, next = kNoClaim, start_ns = 0, wait_ns = 0;  // thread 0's
  if (threadIdx.x == 0) claim = claim_task(g, next_static);
  for (;;) {
    if (threadIdx.x == 0) {
      s_task = decode_claim(g, l, claim);
      if (run_aborted(g.control)) s_task.valid = false;
      if (l.claim_ahead && s_task.valid) next = claim_task(g, next_static);  // read after the tile
    }
    __syncthreads();
    const Claimed task = s_task;
    if (!task.valid) return;
    if (l.prefetch_bytes) prefetch_task_weights(g, task.task, l.prefetch_bytes);
    if (threadIdx.x == 0) {
      const uint64_t claimed_ns = global_timer_ns();
      s_ready = wait_for_task(g, l, task.task, task.step);
      start_ns = global_timer_ns();
      wait_ns = start_ns - claimed_ns;
    }
    __syncthreads();
    if (!s_ready) return;
    const TaskSite site{g.control, task.task, task.step};
    run_device_task(g, site, smem);
    __syncthreads();  // the tile's writes, by every thread, come before the release below
    if (threadIdx.x == 0) {
      DeviceAtomic(g.counters[g.tasks[site.task].signal_counter]).fetch_add(1, kRelease);
      record_trace(g.control, g.n_tasks, site, start_ns, wait_ns);
      claim = l.claim_ahead ? next : claim_task(g, next_static);
    }
  }
}

template <int MinBlocksPerSm>
uint32_t blocks_per_sm(size_t smem) {
  SP_CUDA(cudaFuncSetAttribute(persistent_kernel<MinBlocksPerSm>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               int(smem)));
  int blocks = 0;
  SP_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, persistent_kernel<MinBlocksPerSm>, kBlockThreads, smem));
  return uint32_t(blocks);
}

}  // namespace

uint32_t megakernel_blocks_per_sm(uint32_t min_blocks_per_sm, size_t smem) {
  return min_blocks_per_sm >= 2 ? blocks_per_sm<2>(smem) : blocks_per_sm<1>(smem);
}

void launch_megakernel(const DeviceGraph& g, uint32_t min_blocks_per_sm, uint32_t blocks, size_t smem,
                       const MegakernelLaunch& launch, cudaStream_t stream) {
  if (min_blocks_per_sm >= 2) persistent_kernel<2><<<blocks, kBlockThreads, smem, stream>>>(g, launch);
  else persistent_kernel<1><<<blocks, kBlockThreads, smem, stream>>>(g, launch);
  cuda_check(cudaGetLastError(), "persistent_kernel<<<>>>");
}

}  // namespace spindle::cuda

#include "megakernel/megakernel.h"

#include "megakernel/bulk_copy.cuh"
#include "megakernel/cuda_check.h"
#include "megakernel/device_atomic.cuh"
#include "megakernel/device_failure.cuh"
#include "megakernel/run_device_task.cuh"
#include "tasks/counters.h"

namespace spindle::cuda {
namespace {

// A claim on a task: a ticket (dynamic schedule) or an index into the block's static list,
// over all `steps` of the launch, decoded when the block gets to it.
struct Claimed {
  bool valid;
  bool same_signal;  // static list: the next entry signals the same counter (kListSameSignal)
  uint32_t task, step;
};

// Thread 0's state from task to task.
struct Dispatcher {
  unsigned long long start_ns, wait_ns;
  uint32_t known_counter, known_value;  // a value of one counter this block has acquired
  uint32_t pending, pending_counter;    // releases held for the next task
  // The run control's, read once: the control block is global memory, and every acquire
  // empties the L1, so each read would be another round trip on the way to the next task.
  DeviceTrace* trace;
  uint32_t* progress;
  uint32_t step_base;
};

// Thread 32 (the claimer). `next_static` counts the block's static-list entries claimed so far.
__device__ uint64_t claim_task(const DeviceGraph& g, unsigned long long& next_static) {
  if (g.list_begin) return next_static++;
  return atomicAdd(&g.control->ticket, 1ull);
}

__device__ Claimed decode_claim(const DeviceGraph& g, const MegakernelLaunch& l, uint64_t claim) {
  uint32_t begin = 0, len = g.n_tasks;
  if (g.list_begin) {
    begin = g.list_begin[blockIdx.x];
    len = g.list_begin[blockIdx.x + 1] - begin;
  }
  if (claim >= uint64_t(l.steps) * len) return {false, false, 0, 0};
  const uint32_t index = uint32_t(claim % len);
  const uint32_t entry = g.list_begin ? g.list_tasks[begin + index] : index;
  return {true, (entry & kListSameSignal) != 0, entry & ~kListSameSignal, l.first_step + uint32_t(claim / len)};
}

// Thread 32: the block's next task, or an invalid one once the launch's tasks are all claimed
// or the run was aborted. It runs while thread 0 releases the last task, so the two round
// trips overlap.
__device__ Claimed claim_next(const DeviceGraph& g, const MegakernelLaunch& l, unsigned long long& next_static) {
  const uint64_t claim = claim_task(g, next_static);
  const bool aborted = run_aborted(g.control);
  Claimed c = decode_claim(g, l, claim);
  if (aborted) c.valid = false;
  return c;
}

// Thread 0: waits until the task's counter reaches its target for `step` (acquire), backing
// off with __nanosleep. A value this block has already acquired (by a wait, or by the
// acquire-release add of its own last signal) that reaches the target needs no new load:
// counters only grow, and that acquire already ordered what follows. False when the run was
// aborted or this wait outlived the watchdog, which it then reports.
__device__ bool wait_for_task(const DeviceGraph& g, const MegakernelLaunch& l, const SpTask& t, uint32_t task,
                              uint32_t step, Dispatcher& d) {
  if (t.wait_counter == SP_NO_COUNTER) return true;
  const uint32_t target = sp_wait_target(t, step);
  if (t.wait_counter == d.known_counter && sp_counter_reached(d.known_value, target)) return true;
  DeviceAtomic counter(g.counters[t.wait_counter]);
  uint32_t value = counter.load(kAcquire);
  if (!sp_counter_reached(value, target)) {
    const uint64_t start = global_timer_ns();
    for (uint32_t sleep_ns = l.first_sleep_ns;; sleep_ns = min(2 * sleep_ns + 1, l.max_sleep_ns)) {
      __nanosleep(sleep_ns);
      value = counter.load(kAcquire);
      if (sp_counter_reached(value, target)) break;
      if (run_aborted(g.control)) return false;
      if (global_timer_ns() - start > l.watchdog_ns) {
        report_failure(g.control, {kFailWatchdog, task, step, t.wait_counter, value, target});
        return false;
      }
    }
  }
  d.known_counter = t.wait_counter;
  d.known_value = value;
  return true;
}

// Warp 0 (all lanes): copies task `task`'s staged record into `st`, all of it in one round
// trip, read as Resident: each record is read once a step, and the weight stream would evict
// it from L2 in between. In the same round trip lane 0 (thread 0) reads the counter the block
// last signalled or waited on (acquire) into d.known_value: the next task most often waits on
// it, so a block that finished its last task late finds its wait met without another round
// trip (docs/JOURNAL.md, fifteenth session). The record's load stays ahead of the acquire,
// which does not hold back loads issued before it.
__device__ void stage_task(const DeviceGraph& g, uint32_t task, StagedTask& st, Dispatcher& d) {
  constexpr uint32_t kPieces = sizeof(StagedTask) / 16;
  static_assert(sizeof(StagedTask) % 16 == 0 && kPieces <= 32);
  const uint32_t lane = lane_id();
  uint4 piece{};
  if (lane < kPieces) piece = load16_resident_in_order(reinterpret_cast<const uint4*>(g.staged + task) + lane);
  if (lane == 0 && d.known_counter != SP_NO_COUNTER)
    d.known_value = DeviceAtomic(g.counters[d.known_counter]).load(kAcquire);  // counters only grow
  if (lane < kPieces) reinterpret_cast<uint4*>(&st)[lane] = piece;
  __syncwarp();
}

// Each block runs the tasks it claims, in claim order. Params and arena bases are copied to
// shared memory once. Warp 0 stages the claimed task's record and views; thread 0 starts the
// weight preload and the task's L2 prefetch for a later stage, and waits on the task's
// counter; then the block runs the tile, and thread 0 signals while thread 32 claims the next
// task.
template <int MinBlocksPerSm>
__global__ void __launch_bounds__(kBlockThreads, MinBlocksPerSm) persistent_kernel(DeviceGraph g, MegakernelLaunch l) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ Claimed s_task;
  __shared__ uint32_t s_ready;
  __shared__ __align__(16) StagedTask s_staged;
  __shared__ __align__(16) SpGraphParams s_params;
  __shared__ uint8_t* s_arenas[SP_MAX_ARENAS];
  __shared__ InputKey s_input;
  __shared__ WeightPreload s_preload;
  __shared__ __align__(8) uint64_t s_preload_bar;

  for (uint32_t i = threadIdx.x; i < g.n_arenas; i += blockDim.x) s_arenas[i] = g.ctx.arenas[i];
  if (threadIdx.x < sizeof(SpGraphParams) / 4)
    reinterpret_cast<uint32_t*>(&s_params)[threadIdx.x] = reinterpret_cast<const uint32_t*>(g.ctx.params)[threadIdx.x];
  const TileContext ctx{&s_params, s_staged.views, s_arenas, g.ctx.state};
  if (threadIdx.x == 0) {
    s_input.valid = 0;
    s_preload = {0, smem_address(&s_preload_bar), 0};
    mbar_init(s_preload.bar, 1);
    mbar_init_fence();
  }
  __syncthreads();

  // Thread 0's state across tasks lives in shared memory, not in registers: the kernel is at
  // its register limit, and a loop-carried value the compiler spilled to local memory would
  // sit in the L1 that every acquire load invalidates.
  __shared__ Dispatcher s_d;
  __shared__ unsigned long long s_next_static;  // thread 32's
  if (threadIdx.x == 0) {
    s_d.start_ns = s_d.wait_ns = 0;
    s_d.known_counter = SP_NO_COUNTER;
    s_d.known_value = 0;
    s_d.pending = 0;
    s_d.pending_counter = SP_NO_COUNTER;
    s_d.trace = g.control->trace;
    s_d.progress = g.control->progress;
    s_d.step_base = g.control->step_base;
  } else if (threadIdx.x == 32) {
    s_next_static = 0;
    s_task = claim_next(g, l, s_next_static);
  }
  for (;;) {
    __syncthreads();
    const Claimed task = s_task;
    if (!task.valid) break;
    if (threadIdx.x < 32) stage_task(g, task.task, s_staged, s_d);
    if (threadIdx.x == 0) {
      uint32_t* progress = s_d.progress;
      if (progress) {
        progress[4 * blockIdx.x] = task.task;
        progress[4 * blockIdx.x + 1] = task.step;
        progress[4 * blockIdx.x + 2] = 1;
      }
      if (l.preload_bytes)
        s_preload.bytes = start_weight_preload(s_staged.t, ctx, smem, l.preload_bytes, l.smem_bytes, s_preload.bar);
      const L2Prefetch ahead = s_staged.prefetch;  // after this task's own copies, which it needs first
      if (ahead.bytes) bulk_prefetch_l2(s_arenas[ahead.arena] + ahead.offset, ahead.bytes);
      const uint64_t claimed_ns = global_timer_ns();
      s_ready = wait_for_task(g, l, s_staged.t, task.task, task.step, s_d);
      if (progress) progress[4 * blockIdx.x + 2] = 2;
      s_d.start_ns = global_timer_ns();
      s_d.wait_ns = s_d.start_ns - claimed_ns;
    }
    __syncthreads();
    if (!s_ready) {
      if (s_preload.bytes) mbar_wait(s_preload.bar, s_preload.parity);  // no copy outlives the block
      break;
    }
    const SpTask& t = s_staged.t;  // read in place: nothing writes it until the next claim
    const TaskSite site{g.control, task.task, task.step};
    const TileExtras extras{l.input_cache ? &s_input : nullptr, t.wait_counter,
                            t.wait_counter == SP_NO_COUNTER ? 0u : sp_wait_target(t, task.step), &s_preload};
    run_device_task(t, ctx, g, site, smem, &extras);
    __syncthreads();  // the tile's writes, by every thread, come before the release below
    if (threadIdx.x == 0) {
      const uint64_t end_ns = global_timer_ns();  // the trace's end: the tile's, not the release's
      if (s_preload.bytes) {  // every thread has waited for that phase: the next copy completes the next
        s_preload.parity ^= 1u;
        s_preload.bytes = 0;
      }
      ++s_d.pending;
      s_d.pending_counter = t.signal_counter;
      if (!(l.merge_release && task.same_signal)) {  // else the next task of the list signals it too
        // Acquire-release, reading the sum: when this block's add completes the count, its own
        // next wait on the counter (the usual case for the block that finishes a stage last)
        // needs no load.
        const uint32_t before = DeviceAtomic(g.counters[s_d.pending_counter]).fetch_add(s_d.pending, kAcqRel);
        s_d.known_counter = s_d.pending_counter;
        s_d.known_value = before + s_d.pending;
        s_d.pending = 0;
      }
      record_trace(s_d.trace, s_d.step_base, g.n_tasks, site, s_d.start_ns, end_ns, s_d.wait_ns);
      if (s_d.progress) s_d.progress[4 * blockIdx.x + 2] = 3;
    } else if (threadIdx.x == 32) {
      s_task = claim_next(g, l, s_next_static);  // every thread has read s_task before the barrier above
    }
  }
  if (threadIdx.x == 0 && s_d.pending) DeviceAtomic(g.counters[s_d.pending_counter]).fetch_add(s_d.pending, kRelease);
}

template <int MinBlocksPerSm>
uint32_t blocks_per_sm(size_t smem) {
  SP_CUDA(cudaFuncSetAttribute(persistent_kernel<MinBlocksPerSm>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               int(smem)));
  int blocks = 0;
  SP_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, persistent_kernel<MinBlocksPerSm>, kBlockThreads, smem));
  return uint32_t(blocks);
}

template <int MinBlocksPerSm>
size_t static_smem() {
  cudaFuncAttributes attr{};
  SP_CUDA(cudaFuncGetAttributes(&attr, persistent_kernel<MinBlocksPerSm>));
  return attr.sharedSizeBytes;
}

}  // namespace

size_t megakernel_static_smem(uint32_t min_blocks_per_sm) {
  return min_blocks_per_sm >= 2 ? static_smem<2>() : static_smem<1>();
}

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

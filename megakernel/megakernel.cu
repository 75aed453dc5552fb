#include "megakernel/megakernel.h"

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
  unsigned long long next_static;  // static-list entries claimed so far
  unsigned long long claim;
  unsigned long long start_ns, wait_ns;
  uint32_t seen_counter, seen_target;  // the last wait target reached
  uint32_t pending, pending_counter;   // releases held for the next task
};

// Thread 0. `next_static` counts the block's static-list entries claimed so far.
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

// Thread 0: waits until the task's counter reaches its target for `step` (acquire), backing
// off with __nanosleep. A target this thread has already seen reached needs no new load:
// counters only grow, and its acquire already ordered what follows. False when the run was
// aborted or this wait outlived the watchdog, which it then reports.
__device__ bool wait_for_task(const DeviceGraph& g, const MegakernelLaunch& l, const SpTask& t, uint32_t task,
                              uint32_t step, uint32_t& seen_counter, uint32_t& seen_target) {
  if (t.wait_counter == SP_NO_COUNTER) return true;
  const uint32_t target = sp_wait_target(t, step);
  if (t.wait_counter == seen_counter && target == seen_target) return true;
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
  seen_counter = t.wait_counter;
  seen_target = target;
  return true;
}

// A task's record, with its view operands renumbered 0..7, and those views: what the tiles
// read, in shared memory, so that after a wait (whose acquire empties the L1) the tile starts
// without a chain of dependent loads.
struct StagedTask {
  SpTask t;
  SpView views[SP_TASK_OPERANDS];
};

// The operand words of each opcode that are view ids (tasks/operands.h).
__device__ __forceinline__ uint32_t view_operand_mask(uint32_t op) {
  switch (op) {
    case SP_OP_EMBED: return 0x03u;
    case SP_OP_GEMV: return 0x5Fu;  // W x norm out residual, argmax (5 is the flags)
    case SP_OP_GATE_UP: return 0x1Fu;
    case SP_OP_ATTENTION: return 0xFFu;
    case SP_OP_SAMPLE: return 0x1Bu;  // logits argmax, forced out (2 is the partial count)
    default: return 0u;
  }
}

// Warp 0 (all lanes): copies task `task` and its operand views into `st`.
__device__ void stage_task(const DeviceGraph& g, uint32_t task, StagedTask& st) {
  const uint32_t lane = lane_id();
  const uint32_t word = lane < SP_TASK_WORDS ? __ldg(reinterpret_cast<const uint32_t*>(g.tasks + task) + lane) : 0u;
  const uint32_t op = __shfl_sync(0xffffffffu, word, 0);
  const uint32_t k = lane & 7u;
  const uint32_t operand = __shfl_sync(0xffffffffu, word, 8 + k);
  const bool is_view = ((view_operand_mask(op) >> k) & 1u) && operand != SP_NO_VIEW;
  if (lane < SP_TASK_OPERANDS && is_view) {
    const uint4* src = reinterpret_cast<const uint4*>(g.ctx.views + operand);
    uint4* dst = reinterpret_cast<uint4*>(&st.views[lane]);
    dst[0] = __ldg(src);
    dst[1] = __ldg(src + 1);
  }
  if (lane < SP_TASK_WORDS) reinterpret_cast<uint32_t*>(&st.t)[lane] = lane >= 8 && is_view ? k : word;
  __syncwarp();
}

// Each block runs the tasks it claims, in claim order. Params and arena bases are copied to
// shared memory once. Warp 0 stages the claimed task's record and views; thread 0 waits on
// the task's counter; then the block runs the tile and thread 0 signals.
template <int MinBlocksPerSm>
__global__ void __launch_bounds__(kBlockThreads, MinBlocksPerSm) persistent_kernel(DeviceGraph g, MegakernelLaunch l) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ Claimed s_task;
  __shared__ uint32_t s_ready;
  __shared__ __align__(16) StagedTask s_staged;
  __shared__ __align__(16) SpGraphParams s_params;
  __shared__ uint8_t* s_arenas[SP_MAX_ARENAS];
  __shared__ InputKey s_input;

  for (uint32_t i = threadIdx.x; i < g.n_arenas; i += blockDim.x) s_arenas[i] = g.ctx.arenas[i];
  if (threadIdx.x < sizeof(SpGraphParams) / 4)
    reinterpret_cast<uint32_t*>(&s_params)[threadIdx.x] = reinterpret_cast<const uint32_t*>(g.ctx.params)[threadIdx.x];
  const TileContext ctx{&s_params, s_staged.views, s_arenas, g.ctx.state};
  if (threadIdx.x == 0) s_input.valid = 0;
  __syncthreads();

  // Thread 0's state across tasks lives in shared memory, not in registers: the kernel is at
  // its register limit, and a loop-carried value the compiler spilled to local memory would
  // sit in the L1 that every acquire load invalidates.
  __shared__ Dispatcher s_d;
  if (threadIdx.x == 0) {
    s_d.next_static = 0;
    s_d.start_ns = s_d.wait_ns = 0;
    s_d.seen_counter = SP_NO_COUNTER;
    s_d.seen_target = 0;
    s_d.pending = 0;
    s_d.pending_counter = SP_NO_COUNTER;
    s_d.claim = claim_task(g, s_d.next_static);
  }
  for (;;) {
    if (threadIdx.x == 0) {
      s_task = decode_claim(g, l, s_d.claim);
      if (run_aborted(g.control)) s_task.valid = false;
    }
    __syncthreads();
    const Claimed task = s_task;
    if (!task.valid) break;
    if (threadIdx.x < 32) stage_task(g, task.task, s_staged);
    if (threadIdx.x == 0) {
      uint32_t* progress = g.control->progress;
      if (progress) {
        progress[4 * blockIdx.x] = task.task;
        progress[4 * blockIdx.x + 1] = task.step;
        progress[4 * blockIdx.x + 2] = 1;
      }
      const uint64_t claimed_ns = global_timer_ns();
      s_ready = wait_for_task(g, l, s_staged.t, task.task, task.step, s_d.seen_counter, s_d.seen_target);
      if (progress) progress[4 * blockIdx.x + 2] = 2;
      s_d.start_ns = global_timer_ns();
      s_d.wait_ns = s_d.start_ns - claimed_ns;
    }
    __syncthreads();
    if (!s_ready) break;
    const SpTask& t = s_staged.t;  // read in place: nothing writes it until the next claim
    const TaskSite site{g.control, task.task, task.step};
    const TileExtras extras{l.input_cache ? &s_input : nullptr, t.wait_counter,
                            t.wait_counter == SP_NO_COUNTER ? 0u : sp_wait_target(t, task.step)};
    run_device_task(t, ctx, g, site, smem, &extras);
    __syncthreads();  // the tile's writes, by every thread, come before the release below
    if (threadIdx.x == 0) {
      ++s_d.pending;
      s_d.pending_counter = t.signal_counter;
      if (!(l.merge_release && task.same_signal)) {  // else the next task of the list signals it too
        DeviceAtomic(g.counters[s_d.pending_counter]).fetch_add(s_d.pending, kRelease);
        s_d.pending = 0;
      }
      record_trace(g.control, g.n_tasks, site, s_d.start_ns, s_d.wait_ns);
      if (g.control->progress) g.control->progress[4 * blockIdx.x + 2] = 3;
      s_d.claim = claim_task(g, s_d.next_static);
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

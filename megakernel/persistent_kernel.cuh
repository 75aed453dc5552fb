// The persistent kernel's body (megakernel.h): a template over its build (tile_build.h), each
// build instantiated in a translation unit of its own (persistent_kernels.h), so that the
// compiler's inlining choices for one build do not depend on the others' call sites (with all
// three in one unit, adding the MoE build grew the two-hop build's text by 14 KB), and the
// builds compile in parallel.
#pragma once
#include "megakernel/megakernel.h"
#include "megakernel/counter_wait.cuh"
#include "megakernel/device_atomic.cuh"
#include "megakernel/device_failure.cuh"
#include "megakernel/gang_barrier.cuh"
#include "megakernel/ptx.cuh"
#include "megakernel/run_device_task.cuh"
#include "tasks/counters.h"
#include "tasks/gang.h"

namespace spindle::cuda {
namespace {

enum ClaimKind : uint32_t {
  kClaimEnd,      // the launch's tasks are all claimed, or the run was aborted
  kClaimTask,
  kClaimPending,  // the stage tried was exhausted: the claim goes on at the next stage
};

// A claim on a task of step `step`. Static lists: `same_signal` when the list's next entry
// signals the same counter (kListSameSignal).
struct Claimed {
  uint32_t kind;  // ClaimKind
  bool same_signal;
  uint32_t task, step;
};

// Thread 32's state from claim to claim. Ticket schedule: the (step, stage) the next attempt
// goes to, and how many tasks of that stage the block holds. Static lists: entries claimed so
// far, over all steps of the launch.
struct Claimer {
  uint32_t step, stage, taken;  // step: launch-relative
  unsigned long long next_static;
};

// Thread 0's state from task to task.
struct Dispatcher {
  unsigned long long start_ns, wait_ns;
  uint32_t known_counter, known_value;  // a value of one counter this block has acquired
  uint32_t pending, pending_counter;    // releases held for the next task
  uint32_t record_phase;                // bit b: the phase of s_record_bar[b] to wait for
  uint32_t next_requested;              // the next task's record is on its way
  // The run control's, read once: the control block is global memory, and every acquire
  // empties the L1, so each read would be another round trip on the way to the next task.
  DeviceTrace* trace;
  uint32_t* progress;
  uint32_t step_base;
};

// One claim attempt. Ticket schedule: a block claims the tasks of each stage of each step in
// turn, each from the stage's own ticket counter, taking at most its quota, ceil(tasks /
// blocks), from a stage: usually one, so the task it claims ahead (below) is never of the stage
// it is running. An exhausted stage makes the claim pending at the next. Every block visits
// every stage until it has its quota there or finds it exhausted, so no stage is left with
// unclaimed tasks (quota x blocks >= tasks; the grid is co-resident), and a block claims in
// stage order, so the earliest unfinished stage always has its tasks running.
__device__ Claimed attempt_claim(const DeviceGraph& g, const MegakernelLaunch& l, Claimer& c) {
  if (g.list_begin) {
    const uint32_t begin = g.list_begin[blockIdx.x], len = g.list_begin[blockIdx.x + 1] - begin;
    const unsigned long long claim = c.next_static++;
    if (claim >= uint64_t(l.steps) * len) return {kClaimEnd, false, 0, 0};
    const uint32_t entry = g.list_tasks[begin + uint32_t(claim % len)];
    return {kClaimTask, (entry & kListSameSignal) != 0, entry & ~kListSameSignal, l.first_step + uint32_t(claim / len)};
  }
  if (c.step >= l.steps) return {kClaimEnd, false, 0, 0};
  const uint32_t first = g.stage_first[c.stage], tasks = g.stage_first[c.stage + 1] - first;
  const uint32_t ticket = atomicAdd(l.stage_claims + size_t(c.step) * g.n_stages + c.stage, 1u);
  const Claimed got{kClaimTask, false, first + ticket, l.first_step + c.step};
  const bool claimed = ticket < tasks;
  if (!claimed || ++c.taken == (tasks + gridDim.x - 1) / gridDim.x) {
    c.taken = 0;
    if (++c.stage == g.n_stages) c.stage = 0, ++c.step;
  }
  return claimed ? got : Claimed{kClaimPending, false, 0, 0};
}

// Thread 32: attempts until the claim is a task or the end, which it also is once the run
// was aborted (the flag read beside each attempt, in its round trip).
__device__ Claimed claim_task(const DeviceGraph& g, const MegakernelLaunch& l, Claimer& c) {
  for (;;) {
    const bool aborted = run_aborted(g.control);
    const Claimed claim = attempt_claim(g, l, c);
    if (aborted) return {kClaimEnd, false, 0, 0};
    if (claim.kind != kClaimPending) return claim;
  }
}

// Thread 0 (for the next task) or 32 (for a claim it completed late): starts copying task
// `task`'s staged record (the record with its views, resolved on the host) into `st`,
// completing on `bar`. The buffer's last readers passed a barrier since.
__device__ void request_record(const DeviceGraph& g, uint32_t task, StagedTask& st, uint32_t bar) {
  fence_proxy_async_shared();
  mbar_arrive_expect_tx(bar, sizeof(StagedTask));
  bulk_copy_to_shared(smem_address(&st), g.staged + task, sizeof(StagedTask), bar);
}

// Two-hop build, thread 0: starts the bulk copies of a task's weights (c.bytes > 0, resolved on
// the host) to the dynamic shared memory at c.at, completing on p's barrier, and records them in
// p. Inlined: a call (__noinline__) made the kernel 1.3-2.3% slower (docs/EXPERIMENTS.md).
__device__ inline void start_task_copy(const TaskCopy& c, uint8_t* const* arenas, uint8_t* smem, WeightPreload& p) {
  fence_proxy_async_shared();  // the block's last accesses to this memory come before the copies' writes
  mbar_arrive_expect_tx(p.bar, c.bytes);
  uint32_t dst = smem_address(smem + c.at);
  // Constant indices only: an array indexed at run time would live in local memory, which
  // every acquire empties from the L1.
#pragma unroll
  for (uint32_t i = 0; i < 3; ++i)
    if (i < c.spans) {
      bulk_copy_to_shared(dst, arenas[c.span[i].arena] + c.span[i].offset, c.span[i].bytes, p.bar);
      dst += c.span[i].bytes;
    }
  p.bytes = c.bytes;
  p.at = c.at;
}

// Thread 0: waits until the task's counter reaches its target for `step` (acquire), backing
// off with __nanosleep. A value this block has already acquired that reaches the target needs
// no new load: counters only grow, and that acquire already ordered what follows. False when
// the run was aborted or this wait outlived the watchdog, which it then reports.
__device__ bool wait_for_task(const DeviceGraph& g, const MegakernelLaunch& l, const SpTask& t, uint32_t task,
                              uint32_t step, Dispatcher& d) {
  if (t.wait_counter == SP_NO_COUNTER) return true;
  const uint32_t target = sp_wait_target(t, step);
  if (t.wait_counter == d.known_counter && sp_counter_reached(d.known_value, target)) return true;
  uint32_t value = DeviceAtomic(g.counters[t.wait_counter]).load(kAcquire);
  if (!sp_counter_reached(value, target) &&
      !poll_until(g.counters[t.wait_counter], target, value, l.backoff, g.control,
                  {kFailWatchdog, task, step, t.wait_counter, 0, target}))
    return false;
  d.known_counter = t.wait_counter;
  d.known_value = value;
  return true;
}

// Each block runs the tasks it claims, in claim order, holding one claim ahead: the next
// task's staged record is copied into the other of two buffers while the current task runs,
// so no record load lies between two tasks (docs/EXPERIMENTS.md). Params and
// arena bases are copied to shared memory once. Per task: thread 0 asks for the next task's
// record and waits on the task's counter; the task's weight copy starts meanwhile, from warp 1
// in the plain and MoE builds, from thread 0 before its wait in the two-hop build; the block
// runs the tile; then thread 0 releases and asks the L2 for its share of a later stage's
// weights while thread 32 claims the task after the next.
// kBuild: the tiles the kernel carries (tile_build.h), and how it dispatches: as said above for
// the two-hop build, else as for the plain build.
template <int MinBlocksPerSm, TileBuild kBuild>
__global__ void __launch_bounds__(kBlockThreads, MinBlocksPerSm) persistent_kernel(DeviceGraph g, MegakernelLaunch l) {
  constexpr bool kTwoHop = kBuild == TileBuild::kTwoHop;
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ Claimed s_task, s_next;
  __shared__ uint32_t s_ready;
  __shared__ __align__(16) StagedTask s_staged[2];
  __shared__ __align__(16) SpGraphParams s_params;
  __shared__ uint8_t* s_arenas[SP_MAX_ARENAS];
  __shared__ InputKey s_input;
  __shared__ WeightPreload s_preload;  // the current task's weight copy: its tile reads it here
  __shared__ __align__(8) uint64_t s_preload_bar, s_record_bar[2];

  for (uint32_t i = threadIdx.x; i < g.n_arenas; i += blockDim.x) s_arenas[i] = g.ctx.arenas[i];
  if (threadIdx.x < sizeof(SpGraphParams) / 4)
    reinterpret_cast<uint32_t*>(&s_params)[threadIdx.x] = reinterpret_cast<const uint32_t*>(g.ctx.params)[threadIdx.x];
  if (threadIdx.x == 0) {
    s_input.valid = 0;
    s_preload = {0, 0, smem_address(&s_preload_bar), 0};
    mbar_init(smem_address(&s_preload_bar), 1);
    for (uint32_t b = 0; b < 2; ++b) mbar_init(smem_address(&s_record_bar[b]), 1);
    mbar_init_fence();
  }
  __syncthreads();

  // Thread 0's and 32's state across tasks lives in shared memory, not in registers: the
  // kernel is at its register limit, and a loop-carried value the compiler spilled to local
  // memory would sit in the L1 that every acquire load invalidates.
  __shared__ Dispatcher s_d;
  __shared__ Claimer s_claimer;
  if (threadIdx.x == 0) {
    s_d.start_ns = s_d.wait_ns = 0;
    s_d.known_counter = SP_NO_COUNTER;
    s_d.known_value = 0;
    s_d.pending = 0;
    s_d.pending_counter = SP_NO_COUNTER;
    s_d.record_phase = 0;
    s_d.trace = g.control->trace;
    s_d.progress = g.control->progress;
    s_d.step_base = g.control->step_base;
  } else if (threadIdx.x == 32) {
    s_claimer = {0, 0, 0, 0};
    s_task = claim_task(g, l, s_claimer);
    if (s_task.kind == kClaimTask) request_record(g, s_task.task, s_staged[0], smem_address(&s_record_bar[0]));
    s_next = s_task.kind == kClaimTask ? attempt_claim(g, l, s_claimer) : s_task;
  }
  for (uint32_t buffer = 0;; buffer ^= 1) {
    __syncthreads();
    const Claimed task = s_task;
    if (task.kind != kClaimTask) break;
    const uint32_t bar = smem_address(&s_record_bar[buffer]), next_bar = smem_address(&s_record_bar[buffer ^ 1]);
    mbar_wait(bar, (s_d.record_phase >> buffer) & 1u);
    StagedTask& staged = s_staged[buffer];
    const TileContext ctx{&s_params, staged.views, s_arenas, g.ctx.state, &staged.params};
    if (threadIdx.x == 0) {
      const uint64_t claimed_ns = global_timer_ns();
      s_d.next_requested = s_next.kind == kClaimTask;
      if (s_d.next_requested) request_record(g, s_next.task, s_staged[buffer ^ 1], next_bar);
      uint32_t* progress = s_d.progress;
      if (progress) {
        progress[4 * blockIdx.x] = task.task;
        progress[4 * blockIdx.x + 1] = task.step;
        progress[4 * blockIdx.x + 2] = 1;
      }
      if (kTwoHop && staged.copy.bytes) start_task_copy(staged.copy, s_arenas, smem, s_preload);
      s_ready = wait_for_task(g, l, staged.t, task.task, task.step, s_d);
      if (progress) progress[4 * blockIdx.x + 2] = 2;
      s_d.start_ns = global_timer_ns();
      s_d.wait_ns = s_d.start_ns - claimed_ns;
    } else if (!kTwoHop && l.preload_bytes && warp_id() == 1) {
      start_weight_preload(staged.t, ctx, smem, l.preload_bytes, l.smem_bytes, s_preload);
    }
    __syncthreads();
    if (!s_ready) {
      if (threadIdx.x == 0) {  // no copy outlives the block
        if (s_preload.bytes) mbar_wait(s_preload.bar, s_preload.parity);
        if (s_d.next_requested) mbar_wait(next_bar, (s_d.record_phase >> (buffer ^ 1)) & 1u);
      }
      break;
    }
    const SpTask& t = staged.t;  // read in place: nothing writes it until the next claim
    const TaskSite site{g.control, task.task, task.step};
    const uint32_t position = l.first_position + (task.step - l.first_step);
    const TileExtras extras{l.input_cache ? &s_input : nullptr, t.wait_counter,
                            t.wait_counter == SP_NO_COUNTER ? 0u : sp_wait_target(t, task.step), &s_preload,
                            position};
    if constexpr (kTwoHop) {
      // A gang's members run at once when the host gave gang counters (every member its block).
      const uint32_t width = sp_gang_width(t);
      const bool member = g.gang_counters && width > 1;
      GangBarrier gang{};
      if (member)
        gang = {g.gang_counters + (task.task - t.gang_rank), width, t.gang_rank,
                width * ((sp_gang_phases(t.op) - 1u) * task.step + 1u), l.backoff};
      run_device_task<TileBuild::kTwoHop>(t, ctx, g, site, smem, &extras, gang);
    } else {
      run_device_task<kBuild>(t, ctx, g, site, smem, &extras);
    }
    __syncthreads();  // the tile's writes, by every thread, come before the release below
    if (threadIdx.x == 0) {
      const uint64_t end_ns = global_timer_ns();  // the trace's end: the tile's, not the release's
      if (s_preload.bytes) {  // every thread has waited for that phase: the next copy completes the next
        s_preload.parity ^= 1u;
        s_preload.bytes = 0;
      }
      s_d.record_phase ^= 1u << buffer;  // every thread has waited for this buffer's record
      ++s_d.pending;
      s_d.pending_counter = t.signal_counter;
      if (!(l.merge_release && task.same_signal)) {  // else the next task of the list signals it too
        // Not waited for: reading the sum here, or the next task's counter beside the add,
        // made the step slower than the next wait's own load.
        DeviceAtomic(g.counters[s_d.pending_counter]).fetch_add(s_d.pending, kRelease);
        s_d.pending = 0;
      }
      // The L2 prefetch for a later stage goes after the release: asked at the claim, it was in
      // flight during the wait and the tile, where it held the acquire loads and the input's
      // staging (docs/EXPERIMENTS.md).
      const L2Prefetch ahead = staged.prefetch;
      if (ahead.bytes) bulk_prefetch_l2(s_arenas[ahead.arena] + ahead.offset, ahead.bytes);
      record_trace(s_d.trace, s_d.step_base, g.n_tasks, site, s_d.start_ns, end_ns, s_d.wait_ns);
      if (s_d.progress) s_d.progress[4 * blockIdx.x + 2] = 3;
    } else if (threadIdx.x == 32) {  // every thread has read s_task and s_next before the barrier above
      Claimed next = s_next;
      if (next.kind == kClaimPending) {  // the record was not asked for: ask now
        next = claim_task(g, l, s_claimer);
        if (next.kind == kClaimTask) request_record(g, next.task, s_staged[buffer ^ 1], next_bar);
      }
      s_task = next;
      s_next = next.kind == kClaimTask ? attempt_claim(g, l, s_claimer) : next;
    }
  }
  if (threadIdx.x == 0 && s_d.pending) DeviceAtomic(g.counters[s_d.pending_counter]).fetch_add(s_d.pending, kRelease);
}

}  // namespace
}  // namespace spindle::cuda

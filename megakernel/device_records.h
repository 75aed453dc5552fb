// Records the host and the kernels share: the kernels' view of the graph, the per-run control
// block, failure and trace records. Plain data, compiled by both the host compiler and nvcc.
#pragma once
#include <stdint.h>

#include "ops/context.h"
#include "tasks/task.h"

namespace spindle::cuda {

// Threads per block of every kernel (the persistent one and the per-op baselines).
constexpr uint32_t kBlockThreads = 256;

// What stopped a run on the device. The tiles cannot throw, so they record the first failure
// and raise the abort flag; the host turns the record into a spindle::Error.
enum DeviceFailureKind : uint32_t {
  kFailNone = 0,
  kFailWatchdog = 1,       // counter, value, target: the wait that timed out
  kFailTokenRange = 2,     // value: the token, target: the embedding's rows
  kFailPositionRange = 3,  // value: the position, target: the KV capacity
  kFailStepRange = 4,      // value: the step, target: the out-token slots
  kFailGangWatchdog = 5,   // counter: the waiting member's rank; value, target: its gang's barrier
  kFailExpertRange = 6,    // counter: the routing slot; value: its expert, target: the experts
};

// How a block waits for a counter (megakernel/counter_wait.cuh).
struct Backoff {
  uint32_t first_sleep_ns, max_sleep_ns;  // between polls: the first sleep, doubled up to the longest
  uint64_t watchdog_ns;                   // a wait longer than this fails the run
};

struct DeviceFailure {
  uint32_t kind;  // DeviceFailureKind
  uint32_t task, step;
  uint32_t counter;
  uint32_t value, target;
};

// One task of one step, as the kernels record it (times from %globaltimer, in ns).
struct DeviceTrace {
  uint32_t step, task, worker, reserved;
  uint64_t start_ns, end_ns, wait_ns;
};

// Device memory the host rewrites before each run; the captured per-op graph reads it too,
// so nothing here is baked into a launch.
struct RunControl {
  uint32_t abort;             // raised by the first failure; every waiter checks it
  uint32_t step_base;         // executor step of the run's first step
  uint32_t state_step_base;   // SpStepState::step at the run's start (per-op kernels derive
                              // their step from the state, which SAMPLE advances)
  uint32_t reserved;
  DeviceTrace* trace;         // record (step - step_base) * tasks + task, or nullptr
  uint32_t* progress;         // persistent kernel: per block {task, step, phase} (1 waiting,
                              // 2 running, 3 done), for the failure report
  DeviceFailure failure;
};

// Everything a kernel needs, passed by value; every pointer is device memory that lives as
// long as the executor.
// A static list entry with this bit set is followed, in the same list, by a task that signals
// the same counter and does not wait on it: the block may release both with one add.
constexpr uint32_t kListSameSignal = 0x80000000u;

// `bytes` (a multiple of 16, 0 = none) of an arena from byte `offset` (16-byte aligned; arenas
// start 256-byte aligned), as the bulk copies and prefetches need them.
struct ArenaSpan {
  uint32_t arena, bytes;
  uint64_t offset;
};
using L2Prefetch = ArenaSpan;  // weights of a later stage a task asks the L2 for (l2_prefetch.h)

// The weights the persistent kernel's two-hop build copies into shared memory for a task, as
// the host resolves them once (task_copies.h): `spans` spans, one after the other, `bytes` in
// all (0: the tile reads global memory), placed at `at`, above the task's tile.
struct TaskCopy {
  uint32_t bytes, at, spans;
  ArenaSpan span[3];
};

// A task's record with its view operands renumbered 0..7 and those views beside it, and its
// parameter record (operand renumbered 0), as the host prepares them once (staged_tasks in
// cuda_executor.cpp): the persistent kernel copies one to shared memory in a single round trip
// (whole 16-byte pieces), and the tiles read everything from there. Read from the graph's table
// instead, every field a tile reads after a barrier is another load from the L2.
struct alignas(16) StagedTask {
  SpTask t;
  SpView views[SP_TASK_OPERANDS];
  SpOpParams params;
  L2Prefetch prefetch;  // weights of a later stage this task asks the L2 for (l2_prefetch.h)
  TaskCopy copy;        // two-hop build: its weights copied into shared memory (none: bytes 0)
};

struct DeviceGraph {
  TileContext ctx;
  const SpTask* tasks;       // per-op kernels (nullptr for the persistent kernel)
  const StagedTask* staged;  // the same tasks, staged: the persistent kernel's (else nullptr)
  uint32_t n_tasks;
  uint32_t n_arenas;
  uint32_t attn_positions;     // positions per attention score block in shared memory
  uint32_t attn_kv_positions;  // positions whose K and V rows one attention stage holds
  uint32_t* counters;
  const uint32_t* list_begin;  // static schedule: block b runs list_tasks[list_begin[b] ..
  const uint32_t* list_tasks;  // list_begin[b+1]) each step (task | kListSameSignal flag);
                               // nullptr for the ticket schedule
  const uint32_t* stage_first;  // ticket schedule: stage s is tasks stage_first[s] ..
  uint32_t n_stages;            // stage_first[s+1] (op_runs of graph_stages); else nullptr and 0
  uint32_t* gang_counters;      // persistent kernel, gangs' members at once: gang barrier words
                                // (megakernel/gang_barrier.cuh) at each gang's rank-0 record;
                                // nullptr: every gang runs whole (tasks/gang.h)
  RunControl* control;
};

}  // namespace spindle::cuda

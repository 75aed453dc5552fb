// Records the Vulkan executor's host code and its shaders share: the staged task table, the
// push constants of a dispatch, the run's control block, the per-worker held claim, the trace
// record. Plain 32-bit words and 64-bit buffer device addresses; shaders/gen_constants.cpp
// turns their layout into the GLSL constants the shaders use, so the two sides cannot drift
// apart.
#pragma once
#include <stdint.h>

#include "tasks/task.h"

// What stopped a run on the device (the first failure is kept). The numbers match the CUDA
// executor's DeviceFailureKind where the meaning is the same.
enum VulkanFailureKind : uint32_t {
  kVkFailNone = 0,
  kVkFailTokenRange = 2,     // value: the token, target: the embedding's rows
  kVkFailPositionRange = 3,  // value: the position, target: the KV capacity
  kVkFailStepRange = 4,      // value: the step, target: the out-token slots
  kVkFailTaskTooLong = 5,    // value: the task's loop cost, target: one dispatch's budget
  kVkFailExpertRange = 6,    // slot: the routing slot, value: its expert, target: the experts
};

// What a dispatch does (VulkanPush::mode).
enum VulkanMode : uint32_t {
  kVkModeRun = 0,         // claim, wait, run tasks
  kVkModeClockProbe = 1,  // write the shader clock to VulkanControl::clock and stop
};

// VulkanPush::budget for no budget: only the spin bound ends a wait, and no task's loop cost
// is counted (drivers other than lavapipe have no loop limit).
enum : uint32_t { kVkNoBudget = 0xFFFFFFFFu };

// VulkanTraceRecord::sm where the shader cannot read its SM id (no VK_NV_shader_sm_builtins).
enum : uint32_t { kVkNoSm = 0xFFFFFFFFu };

// An operand view resolved on the host: the device address of its first element.
struct VulkanView {
  uint64_t addr;
  uint32_t rows, cols, row_stride;  // row_stride in elements
  uint32_t dtype;                   // SpDtype
};

// A task as the shader reads it: the record with its view operands renumbered 0..7 and those
// views, resolved, beside it, so that a worker fetches all it needs of a task in one round
// trip (16-byte pieces, all loads in flight at once).
struct VulkanStagedTask {
  SpTask task;
  VulkanView views[SP_TASK_OPERANDS];
};

// Push constants of every dispatch of the persistent shader: where everything is.
struct VulkanPush {
  uint64_t tasks;       // VulkanStagedTask[n_tasks]
  uint64_t params;      // SpGraphParams, then the graph's SpOpParams records
  uint64_t state;       // the STATE arena (tasks/step_state.h)
  uint64_t counters;    // u32 per counter, never reset
  uint64_t control;     // VulkanControl, then one VulkanHeld per worker
  uint64_t trace;       // VulkanTraceRecord per ticket of the run, or 0: no trace
  uint32_t n_tasks;
  uint32_t tickets;     // tickets of this run: steps * n_tasks
  uint32_t first_step;  // executor step of ticket 0
  uint32_t budget;      // loop back-edges one invocation may take in one dispatch, or kVkNoBudget
  uint32_t mode;        // VulkanMode
  uint32_t spin_ticks;  // shader clock ticks (in its low 32 bits) a wait may last in one dispatch; 0 = no bound
};

// The run's shared state; reset by the host before a run, kept across its dispatches.
struct VulkanControl {
  uint32_t ticket;  // next ticket to claim
  uint32_t abort;   // raised with the first failure
  uint32_t failure_kind, failure_task, failure_step, failure_value, failure_target;
  uint32_t failure_slot;    // the routing slot of kVkFailExpertRange
  uint32_t loop_limit_hit;  // a worker's loops were cut short: the dispatch's work is undefined
  uint32_t clock_lo, clock_hi;  // kVkModeClockProbe's reading
  uint32_t reserved[5];
};

// A worker's claim that waited longer than its dispatch's budget allowed: the next dispatch
// of the run starts with it. ticket_plus_one = 0: nothing held.
struct VulkanHeld {
  uint32_t ticket_plus_one;
  uint32_t value;  // the counter's value at the last poll
};

// One task of one step (times in shader clock ticks, which may be 32-bit and wrap).
struct VulkanTraceRecord {
  uint32_t step, task, worker;
  uint32_t sm;  // the SM the worker ran on (gl_SMIDNV), or kVkNoSm
  uint64_t start, end, wait;
};

#ifdef __cplusplus
static_assert(sizeof(VulkanView) == 24, "VulkanView is 6 words");
static_assert(sizeof(VulkanStagedTask) == 256, "VulkanStagedTask is 16 pieces of 16 bytes");
static_assert(sizeof(VulkanPush) == 72, "VulkanPush is 18 words");
static_assert(sizeof(VulkanPush) <= 128, "push constants: 128 bytes is the guaranteed minimum");
static_assert(sizeof(VulkanControl) == 64, "VulkanControl is 16 words");
static_assert(sizeof(VulkanHeld) == 8, "VulkanHeld is 2 words");
static_assert(sizeof(VulkanTraceRecord) == 40, "VulkanTraceRecord is 10 words");
#endif

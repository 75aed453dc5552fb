// The persistent compute shader: every workgroup is a worker that claims tasks of the graph
// (a global ticket over step-major order), waits on their counters and runs their tiles, as
// the CPU and CUDA executors do (docs/isa.md).
//
// A dispatch is bounded and resumable. Lavapipe ends every loop of an invocation silently
// after 65,535 back-edges in total, so invocation 0 counts the loop iterations it takes
// (waiting polls and each task's cost) against the budget the host gives; a worker that
// cannot afford its claimed task keeps it in its held slot and ends, and the next dispatch of
// the run starts with it. The host re-dispatches until the counters say the run is done. A
// canary loop at the end tells the host if the count fell short anyway.
#version 460
#pragma use_vulkan_memory_model
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_shader_realtime_clock : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_GOOGLE_include_directive : require
// SP_SM_IDS: the build's second module, for devices with VK_NV_shader_sm_builtins (the
// capability it declares is refused elsewhere): traces record each worker's SM.
#ifdef SP_SM_IDS
#extension GL_NV_shader_sm_builtins : require
#endif

#include "sp_constants.glsl"
#include "memory.glsl"
#include "numerics.glsl"
#include "workgroup.glsl"
#include "protocol.glsl"
#include "dot.glsl"
#include "op_projection.glsl"
#include "op_attention.glsl"
#include "op_embed_sample.glsl"
#include "op_mlp.glsl"
#include "op_moe.glsl"
#include "op_gdn.glsl"

// The opcodes of the graph's tasks, a bit each, set by the host: the dispatch below compiles
// only their tiles. Lavapipe runs the code of every op a task does not take too, its
// invocations masked off, so every op compiled in slows every task (with all of them, the
// dense tiny model's steps took three times as long there as with its own ops') and adds its
// loops to what each task takes of the loop limit (TASK_LOOP_OVERHEAD).
layout(constant_id = 6) const uint GRAPH_OPS = 0xFFFFFFFFu;
bool graph_has(uint op) { return (GRAPH_OPS & (1u << op)) != 0u; }

// The op dispatch, generated from tasks/opcodes.h (gen_constants.cpp). Opcodes are checked on
// the host before a run.
void run_task(Task t) { SP_RUN_OPS(t) }

// The loop iterations the task's tile takes in one invocation, by the ops' count of their loops.
uint task_cost(Task t) {
  SP_COST_OPS(t)
  return 0u;
}

// What lavapipe 22.3 counted against an invocation's loop limit, measured on the tiny model:
// each counted iteration up to about twice over (loops that hold barriers are restructured),
// plus, per task, one back-edge for every loop of the graph's ops' tiles (GRAPH_OPS) that the
// task does not run, entered with every invocation masked off: about 84 loops once inlined
// with every op's tile, a count the overhead must stay above as ops are added.
const uint LOOP_COST_SCALE = 2u;
const uint TASK_LOOP_OVERHEAD = 128u;
// Polls per counted round of a wait: unrolled, they cost the loop limit nothing.
const uint POLLS_PER_ROUND = 16u;

bool tracing() { return uint64_t(pc.trace) != 0ul; }

// Every invocation, at the end of a dispatch: a loop of known length that comes up short means
// the invocation ran out of loop iterations somewhere, and its work cannot be trusted.
void check_loop_limit() {
  uint n = 0u;
  const uint length = 8u + pc.mode;  // not a constant, so the loop stays a loop
  for (uint i = 0u; i < length; ++i) n++;
  if (n != length) pc.control.w[SP_CONTROL_loop_limit_hit] = 1u;
}

uint held_word() { return SP_CONTROL_WORDS + gl_WorkGroupID.x * SP_HELD_WORDS; }

void hold(uint ticket, uint value) {
  pc.control.w[held_word() + SP_HELD_ticket_plus_one] = ticket + 1u;
  pc.control.w[held_word() + SP_HELD_value] = value;
}

// Invocation 0, at a dispatch's start: the ticket it held at the end of the last one, else a
// new claim. The held slot, the abort flag and the params are read in one round trip.
void first_ticket(out uint ticket, out bool aborted) {
  const uint held = pc.control.w[held_word() + SP_HELD_ticket_plus_one];
  aborted = run_aborted();
  stage_params();
  if (held != 0u) pc.control.w[held_word() + SP_HELD_ticket_plus_one] = 0u;
  ticket = held != 0u ? held - 1u : claim_ticket();
}

// Invocation 0: stages the task of `ticket` (its record, s_task, s_step) and waits for its
// counter. False when the run has no more tickets for it or was aborted, or when this
// dispatch's budget cannot cover the wait or the tile (the ticket is then held for the next
// dispatch). {known_counter, known_value} is a value of one counter that invocation 0 read
// earlier, by a poll or by its own signal's add: counters only grow, so a known value that
// reaches the target needs no poll (the case of the worker that completed the stage it now
// waits for), and the acquire barrier after the wait orders what it counts, since an atomic
// read of the counter precedes that barrier either way.
bool stage_and_wait(uint ticket, bool aborted, inout uint used, inout uint known_counter, inout uint known_value,
                    out uint64_t claimed_at) {
  if (aborted || ticket >= pc.tickets) return false;
  claimed_at = tracing() ? clockRealtimeEXT() : 0ul;
  const uint task = ticket % pc.n_tasks, step = pc.first_step + ticket / pc.n_tasks;
  s_task = task;
  s_step = step;
  stage_task(task);
  const Task t = staged_task();
  uint value = 0u;
  if (t.wait_counter != SP_NO_COUNTER) {
    const uint target = wait_target(t, step);
    const bool known = t.wait_counter == known_counter && counter_reached(known_value, target);
    value = known ? known_value : poll_counter(t.wait_counter);
    if (!counter_reached(value, target)) {
      const uint64_t start = clockRealtimeEXT();
      do {
        used += LOOP_COST_SCALE;
        if (used >= pc.budget || run_aborted() ||
            (pc.spin_ticks != 0u && uint(clockRealtimeEXT()) - uint(start) > pc.spin_ticks)) {
          hold(ticket, value);
          return false;
        }
        [[unroll]] for (uint i = 0u; i < POLLS_PER_ROUND; ++i) {
          value = poll_counter(t.wait_counter);
          if (counter_reached(value, target)) break;
        }
      } while (!counter_reached(value, target));
    }
    known_counter = t.wait_counter;
    known_value = value;
  }
  // Without a budget (GPUs) the task's cost is of no use: its reads are skipped.
  const uint cost = pc.budget == SP_NO_BUDGET ? 0u : TASK_LOOP_OVERHEAD + LOOP_COST_SCALE * task_cost(t);
  if (cost > pc.budget) {
    report_failure(SP_FAIL_TASK_TOO_LONG, task, step, cost, pc.budget, 0u);
    return false;
  }
  if (used + cost > pc.budget) {
    hold(ticket, value);
    return false;
  }
  used += cost;
  return true;
}

// The SM the workgroup runs on, where the module can read it: the trace shows whether the
// driver put two workers on one SM.
uint sm_id() {
#ifdef SP_SM_IDS
  return gl_SMIDNV;
#else
  return SP_NO_SM;
#endif
}

void write_trace(uint ticket, uint64_t claimed_at, uint64_t started_at) {
  const uint64_t ended_at = clockRealtimeEXT();
  const uint b = ticket * SP_TRACE_WORDS;
  pc.trace.w[b + SP_TRACE_step] = s_step;
  pc.trace.w[b + SP_TRACE_task] = s_task;
  pc.trace.w[b + SP_TRACE_worker] = gl_WorkGroupID.x;
  pc.trace.w[b + SP_TRACE_sm] = sm_id();
  pc.trace.w[b + SP_TRACE_start] = uint(started_at);
  pc.trace.w[b + SP_TRACE_start + 1u] = uint(started_at >> 32);
  pc.trace.w[b + SP_TRACE_end] = uint(ended_at);
  pc.trace.w[b + SP_TRACE_end + 1u] = uint(ended_at >> 32);
  pc.trace.w[b + SP_TRACE_wait] = uint(started_at - claimed_at);
  pc.trace.w[b + SP_TRACE_wait + 1u] = uint((started_at - claimed_at) >> 32);
}

shared uint s_run;

void main() {
  if (pc.mode == SP_MODE_CLOCK_PROBE) {
    if (gl_WorkGroupID.x == 0u && invocation() == 0u) {
      const uint64_t now = clockRealtimeEXT();
      pc.control.w[SP_CONTROL_clock_lo] = uint(now);
      pc.control.w[SP_CONTROL_clock_hi] = uint(now >> 32);
    }
    return;
  }
  // Invocation 0's, from task to task.
  uint used = 0u, ticket = 0u, known_counter = SP_NO_COUNTER, known_value = 0u;
  bool aborted = false;
  uint64_t claimed_at = 0ul, started_at = 0ul;
  if (invocation() == 0u) first_ticket(ticket, aborted);
  for (;;) {
    if (invocation() == 0u) {
      s_run = stage_and_wait(ticket, aborted, used, known_counter, known_value, claimed_at) ? 1u : 0u;
      started_at = tracing() ? clockRealtimeEXT() : 0ul;
    }
    sync_buffers();  // acquire: the waited-for tasks' writes are visible to every invocation
    if (s_run == 0u) break;
    const Task t = staged_task();
    run_task(t);
    sync_buffers();  // release: every invocation's writes come before the signal
    if (invocation() == 0u) {
      if (tracing()) write_trace(ticket, claimed_at, started_at);
      // Relaxed atomics with no order among them, none waiting for another's result: the
      // signal, the next claim and the abort flag take one round trip together.
      known_counter = t.signal_counter;
      known_value = signal_counter(t.signal_counter);
      ticket = claim_ticket();
      aborted = run_aborted();
    }
  }
  check_loop_limit();
}

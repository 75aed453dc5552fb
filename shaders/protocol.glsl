// The queue protocol's device side (docs/isa.md): task records, monotonic counters, the run's
// control block and its first-failure record.
#ifndef SP_PROTOCOL_GLSL
#define SP_PROTOCOL_GLSL

struct Task {
  uint op, tile_begin, tile_end;
  uint wait_counter, wait_count, wait_mode, signal_counter;
  uint gang_width, gang_rank;  // tasks/gang.h (word 6's upper bytes; 0 or 1: no gang)
  uint operand[8];
};

// The record of the workgroup's task (VulkanStagedTask), staged in shared memory by
// invocation 0 before the barrier that starts the tile.
shared uvec4 s_record[SP_STAGED_VECS];

// Invocation 0: every piece's load is issued before the first is stored, one round trip.
void stage_task(uint task) {
  uvec4 pieces[SP_STAGED_VECS];
  [[unroll]] for (uint i = 0u; i < SP_STAGED_VECS; ++i) pieces[i] = pc.tasks.v[task * SP_STAGED_VECS + i];
  [[unroll]] for (uint i = 0u; i < SP_STAGED_VECS; ++i) s_record[i] = pieces[i];
}

uint record_word(uint w) { return s_record[w / 4u][w % 4u]; }

Task staged_task() {
  Task t;
  t.op = record_word(SP_TASK_op);
  t.tile_begin = record_word(SP_TASK_tile_begin);
  t.tile_end = record_word(SP_TASK_tile_end);
  t.wait_counter = record_word(SP_TASK_wait_counter);
  t.wait_count = record_word(SP_TASK_wait_count);
  const uint word6 = record_word(SP_TASK_wait_mode);  // u16 wait mode, u8 gang width, u8 gang rank
  t.wait_mode = word6 & 0xFFFFu;
  t.gang_width = (word6 >> 16) & 0xFFu;
  t.gang_rank = word6 >> 24;
  t.signal_counter = record_word(SP_TASK_signal_counter);
  [[unroll]] for (uint i = 0u; i < 8u; ++i) t.operand[i] = record_word(SP_TASK_operand + i);
  return t;
}

// Operand view v of the staged task (the host renumbers a task's view operands to 0..7).
View load_view(uint v) {
  const uint b = SP_STAGED_views + v * SP_VKVIEW_WORDS;
  const uint64_t addr = uint64_t(record_word(b + SP_VKVIEW_addr)) | (uint64_t(record_word(b + SP_VKVIEW_addr + 1u)) << 32);
  return View(addr, record_word(b + SP_VKVIEW_rows), record_word(b + SP_VKVIEW_cols),
              record_word(b + SP_VKVIEW_row_stride), record_word(b + SP_VKVIEW_dtype));
}

// tasks/counters.h: the value the counter must reach for `step`, compared modulo 2^32.
uint wait_target(Task t, uint step) { return t.wait_count * (t.wait_mode == SP_WAIT_PREV_STEP ? step : step + 1u); }
bool counter_reached(uint value, uint target) { return int(value - target) >= 0; }

// Signals and polls are relaxed atomics (a plain load racing the signal's atomic write is a
// data race under the Vulkan memory model, and the fences below then order nothing — on
// NVIDIA that gave wrong, run-to-run different tokens); the acquire and the release are the
// workgroup barriers (device-scope fences) that the worker loop puts after a wait and before
// a signal. Lavapipe 22.3 breaks an atomic that carries memory semantics in divergent control
// flow (invocation 0 alone polls and signals): that invocation then does nothing more until
// its loop limit. So the atomics carry none.
//
// A poll is a relaxed atomic load where the host says so (POLL_BY_LOAD: GPUs), else an atomic
// add of 0: lavapipe hoisted an atomicLoad out of an earlier form of the polling loop, which
// no compiler may do with a read-modify-write. On a GPU an add of 0 is a read-modify-write at
// the memory that holds the counter, serialised there with every other worker's polls and
// with the signal they wait for; a load is not. The barrier after the wait is the acquire
// either way, so the load needs no acquire semantics of its own.
layout(constant_id = 3) const bool POLL_BY_LOAD = false;

uint poll_word(Words words, uint i) {
  if (POLL_BY_LOAD) return atomicLoad(words.w[i], gl_ScopeDevice, gl_StorageSemanticsNone, gl_SemanticsRelaxed);
  return atomicAdd(words.w[i], 0u);
}

uint poll_counter(uint c) { return poll_word(pc.counters, c); }
// Returns the counter's value after this signal (persistent.comp's known value).
uint signal_counter(uint c) { return atomicAdd(pc.counters.w[c], 1u) + 1u; }
uint claim_ticket() { return atomicAdd(pc.control.w[SP_CONTROL_ticket], 1u); }
bool run_aborted() { return poll_word(pc.control, SP_CONTROL_abort) != 0u; }

// The first failure is recorded and raises the abort flag, which every worker checks; later
// ones (often consequences of the first) are dropped. `slot`: the routing slot of an expert
// out of range, else 0.
void report_failure(uint kind, uint task, uint step, uint value, uint target, uint slot) {
  if (atomicCompSwap(pc.control.w[SP_CONTROL_failure_kind], 0u, kind) == 0u) {
    pc.control.w[SP_CONTROL_failure_task] = task;
    pc.control.w[SP_CONTROL_failure_step] = step;
    pc.control.w[SP_CONTROL_failure_value] = value;
    pc.control.w[SP_CONTROL_failure_target] = target;
    pc.control.w[SP_CONTROL_failure_slot] = slot;
  }
  atomicExchange(pc.control.w[SP_CONTROL_abort], 1u);
}

// The task the workgroup runs and its step, set by invocation 0 for every invocation; the
// step's position, read once for the workgroup by tiles whose barrier count depends on it.
shared uint s_task, s_step, s_position;

// A tile's operand is out of range: invocation 0 records it; the caller skips the writes.
void fail_task(uint kind, uint value, uint target, uint slot) {
  if (invocation() == 0u) report_failure(kind, s_task, s_step, value, target, slot);
}
void fail_task(uint kind, uint value, uint target) { fail_task(kind, value, target, 0u); }

// Whether this tile is the group's last of the step to arrive, for every invocation.
shared uint s_last_arrival;

// Counts `done` finished tiles in on word `kv` of an arrivals view (ops/arrivals.h arrive_last):
// true, in every invocation, for the task that brings the count to the step's `used` tiles of
// the group, which resets the count. A relaxed atomic between device-scope barriers, as the
// protocol's counters (above: lavapipe breaks atomics with memory semantics in divergent
// control flow): the first releases every invocation's partials; the second, only in the last
// task (the others read nothing more of the group), acquires the other tasks' for the merge.
// Attention's merge, the MLP gangs' sum and the GEMV pieces' sum use it.
// Call in uniform control flow.
bool arrived_last(uint64_t arrivals, uint kv, uint done, uint used) {
  sync_buffers();
  if (invocation() == 0u) {
    Words count = Words(arrivals);
    s_last_arrival = atomicAdd(count.w[kv], done) + done == used ? 1u : 0u;
    if (s_last_arrival != 0u)
      atomicStore(count.w[kv], 0u, gl_ScopeDevice, gl_StorageSemanticsNone, gl_SemanticsRelaxed);
  }
  sync_shared();
  if (s_last_arrival == 0u) return false;
  sync_buffers();
  return true;
}
bool arrived_last(uint64_t arrivals, uint kv, uint used) { return arrived_last(arrivals, kv, 1u, used); }

#endif

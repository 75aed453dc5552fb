// Memory as the persistent shader sees it: every buffer is reached by its device address
// (push constants hold the tables, the host resolves each task's views to addresses), so no
// descriptor limits apply (lavapipe caps one storage-buffer binding at 128 MiB).
//
// Data that tasks exchange (activations, caches, step state, counters, the control block) has
// `nonprivate` members: under the Vulkan memory model only non-private accesses are ordered by
// the protocol's barriers (sync_buffers), which make them available and visible at device
// scope. (`devicecoherent` on the block would say the same, but glslang 11.13 drops it on
// buffer_reference blocks, KhronosGroup/glslang#3386: every access was private, and NVIDIA's
// driver then gave wrong, run-to-run different results.) Weights and the graph's tables are
// read-only and may be cached: `restrict readonly`, what CUDA's `const __restrict__` is, which
// lets a compiler read them through the non-coherent path (ld.global.nc). Nothing writes
// them while a dispatch runs, so no pointer aliases a write.
#ifndef SP_MEMORY_GLSL
#define SP_MEMORY_GLSL

layout(buffer_reference, std430, buffer_reference_align = 2) restrict readonly buffer ConstHalves { uint16_t h[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Words { nonprivate uint w[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) buffer Halves { nonprivate uint16_t h[]; };
// 16-byte vectors: 8 bf16 of an aligned row (dot.glsl's vec_readable), or a piece of a table.
layout(buffer_reference, std430, buffer_reference_align = 16) restrict readonly buffer ConstVecs { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Vecs { nonprivate uvec4 v[]; };

layout(push_constant) uniform Push {
  layout(offset = SP_PUSH_tasks) ConstVecs tasks;
  layout(offset = SP_PUSH_params) ConstVecs params;
  layout(offset = SP_PUSH_state) Words state;
  layout(offset = SP_PUSH_counters) Words counters;
  layout(offset = SP_PUSH_control) Words control;
  layout(offset = SP_PUSH_trace) Words trace;
  layout(offset = SP_PUSH_n_tasks) uint n_tasks;
  layout(offset = SP_PUSH_tickets) uint tickets;
  layout(offset = SP_PUSH_first_step) uint first_step;
  layout(offset = SP_PUSH_budget) uint budget;
  layout(offset = SP_PUSH_mode) uint mode;
  layout(offset = SP_PUSH_spin_ticks) uint spin_ticks;
} pc;

// The graph params, copied into shared memory once a dispatch (stage_params): a read of the
// buffer costs a round trip wherever a device-scope acquire has emptied the caches.
shared uvec4 s_params[SP_PARAMS_VECS];

// Invocation 0, before the dispatch's first barrier.
void stage_params() {
  [[unroll]] for (uint i = 0u; i < SP_PARAMS_VECS; ++i) s_params[i] = pc.params.v[i];
}

uint param(uint word) { return s_params[word / 4u][word % 4u]; }

// Word `word` of op parameter record `record` (tasks/op_params.h), which the host puts after the
// graph params; read from the buffer by the tasks that name one.
uint op_param(uint record, uint word) {
  return pc.params.v[SP_PARAMS_VECS + record * SP_OP_PARAMS_VECS + word / 4u][word % 4u];
}

// An operand view resolved to a device address (VulkanView, host/vulkan_records.h).
struct View {
  uint64_t addr;
  uint rows, cols, stride, dtype;
};

// Address of row r of a view of `bytes`-byte elements.
uint64_t row_address(View v, uint r, uint bytes) { return v.addr + uint64_t(r) * v.stride * bytes; }

// The step state (tasks/step_state.h): the first words of the STATE arena.
Words step_state() { return pc.state; }

#endif

// Memory as the persistent shader sees it: every buffer is reached by its device address
// (push constants hold the tables, the view table holds arena offsets), so no descriptor
// limits apply (lavapipe caps one storage-buffer binding at 128 MiB).
//
// Data that tasks exchange (activations, caches, step state, counters, the control block) has
// `nonprivate` members: under the Vulkan memory model only non-private accesses are ordered by
// the protocol's barriers (sync_buffers), which make them available and visible at device
// scope. (`devicecoherent` on the block would say the same, but glslang 11.13 drops it on
// buffer_reference blocks, KhronosGroup/glslang#3386: every access was private, and NVIDIA's
// driver then gave wrong, run-to-run different results.) Weights and the graph's tables are
// read-only and may be cached: `restrict readonly`, what CUDA's `const __restrict__` is, which
// lets a compiler read them through the non-coherent path (ld.global.nc, as the CUDA tiles
// read weights). Nothing writes them while a dispatch runs, so no pointer aliases a write.
#ifndef SP_MEMORY_GLSL
#define SP_MEMORY_GLSL

layout(buffer_reference, std430, buffer_reference_align = 4) restrict readonly buffer ConstWords { uint w[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) restrict readonly buffer ConstHalves { uint16_t h[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Words { nonprivate uint w[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) buffer Halves { nonprivate uint16_t h[]; };
// 16-byte vectors (8 bf16) for one-load reads of aligned rows (dot.glsl's vec_readable).
layout(buffer_reference, std430, buffer_reference_align = 16) restrict readonly buffer ConstVecs { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Vecs { nonprivate uvec4 v[]; };

layout(push_constant) uniform Push {
  layout(offset = SP_PUSH_tasks) ConstWords tasks;
  layout(offset = SP_PUSH_views) ConstWords views;
  layout(offset = SP_PUSH_params) ConstWords params;
  layout(offset = SP_PUSH_arenas) ConstWords arenas;
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

uint param(uint word) { return pc.params.w[word]; }

// An operand view resolved to a device address (tasks/view.h).
struct View {
  uint64_t addr;
  uint rows, cols, stride, dtype;
};

uint64_t arena_base(uint arena) {
  return uint64_t(pc.arenas.w[2u * arena]) | (uint64_t(pc.arenas.w[2u * arena + 1u]) << 32);
}

View load_view(uint v) {
  const uint b = v * SP_VIEW_WORDS;
  const uint64_t base = arena_base(pc.views.w[b + SP_VIEW_arena]);
  const uint64_t offset = uint64_t(pc.views.w[b + SP_VIEW_offset_lo]) | (uint64_t(pc.views.w[b + SP_VIEW_offset_hi]) << 32);
  return View(base + offset, pc.views.w[b + SP_VIEW_rows], pc.views.w[b + SP_VIEW_cols],
              pc.views.w[b + SP_VIEW_row_stride], pc.views.w[b + SP_VIEW_dtype]);
}

// Address of row r of a view of `bytes`-byte elements.
uint64_t row_address(View v, uint r, uint bytes) { return v.addr + uint64_t(r) * v.stride * bytes; }

// The step state (tasks/step_state.h): the first words of the STATE arena.
Words step_state() { return Words(arena_base(SP_ARENA_STATE)); }

#endif

// A workgroup is one worker: `warps` logical warps of 32 invocations, whatever the device's
// subgroup size (8 on lavapipe, 32 on NVIDIA). A logical warp computes one canonical dot
// product (ops/dot.h): lane l owns elements 256j + 8l .. 256j + 8l + 7, and the lanes'
// partials meet in a butterfly through shared memory.
#ifndef SP_WORKGROUP_GLSL
#define SP_WORKGROUP_GLSL

layout(local_size_x_id = 0) in;  // 32 * warps
// Shared words for the staged projection input (bf16 pairs) or the normed heads of
// QK_NORM_ROPE; the host sizes it for the graph.
layout(constant_id = 1) const uint SHARED_WORDS = 1u;

const uint LANES = 32u;
shared float g_red[gl_WorkGroupSize.x];
shared uint g_words[SHARED_WORDS];

uint invocation() { return gl_LocalInvocationIndex; }
uint lane() { return gl_LocalInvocationIndex % LANES; }
uint warp() { return gl_LocalInvocationIndex / LANES; }
uint warps() { return gl_WorkGroupSize.x / LANES; }

// Between phases of a tile that share memory. Call in uniform control flow.
void sync_shared() { barrier(); }

// Around a task, the protocol's fences: before the signal it releases every invocation's
// writes of the tile, made available at device scope; after the wait it acquires what the
// counter's producers released, made visible to every invocation's reads.
void sync_buffers() {
  controlBarrier(gl_ScopeWorkgroup, gl_ScopeDevice, gl_StorageSemanticsBuffer | gl_StorageSemanticsShared,
                 gl_SemanticsAcquireRelease | gl_SemanticsMakeAvailable | gl_SemanticsMakeVisible);
}

void butterfly_level(uint off) {
  if (lane() < off) {
    precise float s = g_red[invocation()] + g_red[invocation() + off];
    g_red[invocation()] = s;
  }
  sync_shared();
}

// Sums each warp's 32 lane partials in the butterfly order (for off = 16 .. 1, lane l += lane
// l + off); every lane gets its warp's sum. Call in uniform control flow. The levels are
// spelled out: lavapipe does not unroll a loop over off >>= 1, and would count its iterations.
precise float warp_sum(float partial) {
  g_red[invocation()] = partial;
  sync_shared();
  butterfly_level(16u);
  butterfly_level(8u);
  butterfly_level(4u);
  butterfly_level(2u);
  butterfly_level(1u);
  precise float sum = g_red[warp() * LANES];
  sync_shared();  // every lane has read it before g_red is written again
  return sum;
}

// Loops run the same trips in every invocation of the workgroup: `for (j = 0; j <
// trips(n, step); ++j)` with the invocation's own index j * step + offset tested inside, and a
// per-warp condition (a row or head past the task's last) deciding only what is written.
// Lavapipe 22.3 goes wrong otherwise: a loop that reads shared memory and whose bounds differ
// within a SIMD vector never ends (until the loop limit), and one that only some SIMD vectors
// run leaves the workgroup's barriers out of step (a warp then reads shared memory that the
// others have not written yet).
uint trips(uint n, uint step) { return (n + step - 1u) / step; }

#endif

// A workgroup is one worker: `warps` logical warps of 32 invocations, whatever the device's
// subgroup size (8 on lavapipe, 32 on NVIDIA). A logical warp computes one canonical dot
// product (ops/dot.h): lane l owns elements 256j + 8l .. 256j + 8l + 7, and the lanes'
// partials meet in a butterfly, through subgroup shuffles where the subgroup is wide enough
// and through shared memory otherwise.
#ifndef SP_WORKGROUP_GLSL
#define SP_WORKGROUP_GLSL

layout(local_size_x_id = 0) in;  // 32 * warps
// 16-byte vectors of shared memory for the staged projection input (8 bf16 each) or the
// attention warps' normed heads (one element a word); the host sizes it for the graph.
layout(constant_id = 1) const uint SHARED_VECS = 1u;
// Butterfly levels with an offset below this run as subgroup shuffles, the others through
// shared memory. The host sets the device's subgroup size capped at 32 (1 = shared memory
// only). Subgroup invocation i must be workgroup invocation (i mod subgroup size), as on every
// driver tried (lavapipe, NVIDIA): the tests would see a driver where it is not.
layout(constant_id = 2) const uint SHUFFLE_WIDTH = 1u;

const uint LANES = 32u;
shared float g_red[gl_WorkGroupSize.x];
shared uvec4 g_vecs[SHARED_VECS];

uint invocation() { return gl_LocalInvocationIndex; }
uint lane() { return gl_LocalInvocationIndex % LANES; }
uint warp() { return gl_LocalInvocationIndex / LANES; }
uint warps() { return gl_WorkGroupSize.x / LANES; }

// Word i of the shared vectors (the attention's one-element-a-word heads).
uint shared_word(uint i) { return g_vecs[i / 4u][i % 4u]; }
void set_shared_word(uint i, uint w) { g_vecs[i / 4u][i % 4u] = w; }

// Between phases of a tile that share memory. Call in uniform control flow.
void sync_shared() { barrier(); }

// Between phases of a tile that pass data through buffers (the K row the attention appends and
// then scores). Call in uniform control flow.
void sync_workgroup_buffers() {
  controlBarrier(gl_ScopeWorkgroup, gl_ScopeWorkgroup, gl_StorageSemanticsBuffer,
                 gl_SemanticsAcquireRelease | gl_SemanticsMakeAvailable | gl_SemanticsMakeVisible);
}

// Around a task, the protocol's fences: before the signal it releases every invocation's
// writes of the tile, made available at device scope; after the wait it acquires what the
// counter's producers released, made visible to every invocation's reads.
void sync_buffers() {
  controlBarrier(gl_ScopeWorkgroup, gl_ScopeDevice, gl_StorageSemanticsBuffer | gl_StorageSemanticsShared,
                 gl_SemanticsAcquireRelease | gl_SemanticsMakeAvailable | gl_SemanticsMakeVisible);
}

// One level of the butterfly through shared memory (g_red holds the lanes' sums): lane l < off
// adds lane l + off, as ops/dot.h. Skipped, with its barrier, where shuffles do the level.
void shared_level(uint off) {
  if (off < SHUFFLE_WIDTH) return;
  if (lane() < off) {
    precise float s = g_red[invocation()] + g_red[invocation() + off];
    g_red[invocation()] = s;
  }
  sync_shared();
}

// One level as a subgroup shuffle: lane l adds lane l ^ off. Where l's `off` bit is clear
// (every l < off among them) that is s[l] + s[l + off], the canonical sum; where it is set it
// is s[l] + s[l - off], a pair's sum commuted (IEEE addition is commutative bit for bit, NaN
// payloads aside). Bit-exactness: after the canonical level off only lanes below off matter to
// lane 0's final sum, and each of them adds two lanes below 2 * off, which hold the canonical
// values by induction from the first level; so lane 0 ends with exactly ops/dot.h's sum, which
// warp_sum hands to every lane (the other lanes' sums are never used). Offsets below the
// width stay inside a logical warp: a subgroup (of a power-of-two size, consecutive
// invocations) holds whole, aligned groups of min(size, 32) lanes.
precise float shuffle_level(float s, uint off) {
  if (off >= SHUFFLE_WIDTH) return s;
  precise float sum = s + subgroupShuffleXor(s, off);
  return sum;
}

// Sums each warp's 32 lane partials in the butterfly order (for off = 16 .. 1, lane l += lane
// l + off); every lane gets lane 0's sum. Call in uniform control flow. The levels are
// spelled out: lavapipe does not unroll a loop over off >>= 1, and would count its iterations.
// With SHUFFLE_WIDTH 32 it takes no barrier; with 8 (lavapipe) levels 16 and 8 go through
// shared memory and 4, 2, 1 through shuffles.
precise float warp_sum(float partial) {
  precise float s = partial;
  if (SHUFFLE_WIDTH < LANES) {
    g_red[invocation()] = s;
    sync_shared();
    shared_level(16u);
    shared_level(8u);
    shared_level(4u);
    shared_level(2u);
    shared_level(1u);
    s = g_red[invocation()];
  }
  s = shuffle_level(s, 16u);
  s = shuffle_level(s, 8u);
  s = shuffle_level(s, 4u);
  s = shuffle_level(s, 2u);
  s = shuffle_level(s, 1u);
  if (SHUFFLE_WIDTH >= LANES) return subgroupShuffle(s, gl_SubgroupInvocationID & ~(LANES - 1u));
  if (SHUFFLE_WIDTH > 1u) {  // lane 0's sum came from shuffles (no other lane reads its slot)
    if (lane() == 0u) g_red[invocation()] = s;
    sync_shared();
  }
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

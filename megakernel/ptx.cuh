// Every inline PTX statement of the CUDA code, each behind a wrapper named for what it does, so
// that the memory-model, proxy and cache-policy choices are read in one place and the tiles call
// what they mean. Each wrapper is the one statement, its `volatile` and clobbers chosen for its
// callers (said where it matters); the comments at the call sites say why each is used.
#pragma once
#include <stdint.h>
#include <vector_types.h>

namespace spindle::cuda {

// ---- Special registers

// Nanoseconds of the device's global timer: what watchdogs and traces measure with.
__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ uint32_t sm_id() {
  uint32_t id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// ---- L2 eviction policies for the cache hints of loads and copies (createpolicy)

// Kept over normal lines: small read-only data every block reads at every layer or step.
__device__ __forceinline__ uint64_t l2_evict_last() {
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// Evicted before normal lines: weights, which a step streams through the L2 once (1.2 GB for
// qwen3-0.6b against a 60 MB L2), so they push out neither the activations, the KV rows nor
// the later stages' weights asked of the L2 ahead (docs/EXPERIMENTS.md).
__device__ __forceinline__ uint64_t l2_evict_first() {
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// ---- Global loads with a cache policy. Not volatile: the compiler may move them anywhere
// their address is known (the callers order them where they must).

// 16 bytes without allocating in L1, with an L2 policy.
__device__ __forceinline__ uint4 ld_global_no_l1_v4(const void* p, uint64_t policy) {
  uint4 v;
  asm("ld.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "l"(policy));
  return v;
}
__device__ __forceinline__ unsigned short ld_global_no_l1_u16(const void* p, uint64_t policy) {
  unsigned short v;
  asm("ld.L1::no_allocate.L2::cache_hint.u16 %0, [%1], %2;" : "=h"(v) : "l"(p), "l"(policy));
  return v;
}
// 16 bytes through the non-coherent (read-only) path, with an L2 policy.
__device__ __forceinline__ uint4 ld_global_nc_v4(const void* p, uint64_t policy) {
  uint4 v;
  asm("ld.global.nc.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "l"(policy));
  return v;
}
__device__ __forceinline__ unsigned short ld_global_nc_u16(const void* p, uint64_t policy) {
  unsigned short v;
  asm("ld.global.nc.L2::cache_hint.u16 %0, [%1], %2;" : "=h"(v) : "l"(p), "l"(policy));
  return v;
}

// ---- Global words other blocks read or write at once (the cluster program's flagged words)

__device__ __forceinline__ void st_relaxed_gpu_u64(unsigned long long* at, unsigned long long w) {
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(at), "l"(w) : "memory");
}
__device__ __forceinline__ unsigned long long ld_relaxed_gpu_u64(const unsigned long long* at) {
  unsigned long long w;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(w) : "l"(at) : "memory");
  return w;
}
__device__ __forceinline__ ulonglong2 ld_relaxed_gpu_v2_u64(const unsigned long long* at) {
  ulonglong2 w;
  asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];" : "=l"(w.x), "=l"(w.y) : "l"(at) : "memory");
  return w;
}
__device__ __forceinline__ void st_release_gpu_v2_u64(unsigned long long* at, unsigned long long a, unsigned long long b) {
  asm volatile("st.release.gpu.global.v2.u64 [%0], {%1, %2};" ::"l"(at), "l"(a), "l"(b) : "memory");
}
__device__ __forceinline__ ulonglong2 ld_acquire_gpu_v2_u64(const unsigned long long* at) {
  ulonglong2 v;
  asm volatile("ld.acquire.gpu.global.v2.u64 {%0, %1}, [%2];" : "=l"(v.x), "=l"(v.y) : "l"(at) : "memory");
  return v;
}

// ---- Shared memory by its shared-window address (a generic access to shared memory is slower)

__device__ __forceinline__ uint32_t smem_address(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

// 16 bytes. Not volatile: the caller makes the address known only after whatever must precede
// the load.
__device__ __forceinline__ uint4 ld_shared_v4(uint32_t address) {
  uint4 v;
  asm("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(address));
  return v;
}
// 16 bytes, volatile (kept where it is written) but without a memory clobber: for values
// written once, before the launch's first use.
__device__ __forceinline__ uint4 ld_shared_v4_here(uint32_t address) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(address));
  return v;
}
// 8 bytes, neither volatile nor clobbering memory: for values written once, before the launch's
// first use.
__device__ __forceinline__ unsigned long long ld_shared_u64(uint32_t address) {
  unsigned long long v;
  asm("ld.shared.u64 %0, [%1];" : "=l"(v) : "r"(address));
  return v;
}
// Acquire and release at the block's scope: the weight ring's slot tags (weight_ring.cuh).
__device__ __forceinline__ uint32_t ld_acquire_shared_u32(uint32_t address) {
  uint32_t v;
  asm volatile("ld.acquire.cta.shared::cta.u32 %0, [%1];" : "=r"(v) : "r"(address) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_shared_u32(uint32_t address, uint32_t v) {
  asm volatile("st.release.cta.shared::cta.u32 [%0], %1;" ::"r"(address), "r"(v) : "memory");
}
__device__ __forceinline__ void st_shared_zero_u32(uint32_t address) {
  asm volatile("st.shared.u32 [%0], 0;" ::"r"(address) : "memory");
}
// Adds one; returns the value before. Acquire and release at the block's scope: a counter
// whose last increment hands what the others did before theirs to the thread that makes it.
__device__ __forceinline__ uint32_t atom_shared_increment_acq_rel_u32(uint32_t address) {
  uint32_t before;
  asm volatile("atom.acq_rel.cta.shared::cta.add.u32 %0, [%1], 1;" : "=r"(before) : "r"(address) : "memory");
  return before;
}

// ---- Asynchronous 16-byte copies global → shared (cp.async), read at L2 (.cg)

__device__ __forceinline__ void cp_async_cg16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_cg16(uint32_t dst, const void* src, uint64_t policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "l"(policy)
               : "memory");
}
// With the L2 fetching 128 bytes around each piece.
__device__ __forceinline__ void cp_async_cg16_l2_128(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// The thread's copies complete but the last N groups committed.
template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// ---- mbarriers and the bulk-copy engine (cp.async.bulk)

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}
// Whether the phase of `bar` with this parity has completed; never suspends the thread.
__device__ __forceinline__ bool mbar_test_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}
// Waits (spinning on try_wait) until the phase of `bar` with this parity has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  while (!mbar_try_wait(bar, parity)) {
  }
}
// Orders this thread's earlier shared-memory accesses (and, after a barrier, the block's)
// before later bulk copies into the same memory: those are another proxy's writes.
__device__ __forceinline__ void fence_proxy_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// Copies `bytes` (a multiple of 16) from global src to shared dst; completes on `bar`. Its
// callers copy what a step reads once (weights, task records), so the lines are evicted first
// from L2.
__device__ __forceinline__ void bulk_copy_to_shared(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
               " [%0], [%1], %2, [%3], %4;" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar), "l"(l2_evict_first())
               : "memory");
}
// Asks the L2 to fetch `bytes` (a multiple of 16) of global memory from src (16-byte aligned);
// nothing waits for it.
__device__ __forceinline__ void bulk_prefetch_l2(const void* src, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
}

// ---- Clusters (distributed shared memory)

// Peer `rank`'s shared-window address of this block's shared address `local`.
__device__ __forceinline__ uint32_t peer_address(uint32_t local, uint32_t rank) {
  uint32_t a;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(a) : "r"(local), "r"(rank));
  return a;
}
// 16 bytes into a peer's shared memory, completing on the peer's mbarrier (no fence).
__device__ __forceinline__ void push16(uint32_t addr, uint4 v, uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(addr),
               "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(bar)
               : "memory");
}
// 4 bytes into a peer's shared memory, the same way.
__device__ __forceinline__ void push4(uint32_t addr, uint32_t v, uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(addr), "r"(v), "r"(bar)
               : "memory");
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// ---- The compiler

// `p`, as a value the compiler cannot know before this point (an empty volatile asm, which
// stays after the volatile asm before it).
template <class T>
__device__ __forceinline__ T* opaque(T* p) {
  asm volatile("" : "+l"(p));
  return p;
}

}  // namespace spindle::cuda

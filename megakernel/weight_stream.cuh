// The persistent kernel's weight stream (tile_layout.h has its geometry): warp 0 issues bulk
// copies (cp.async.bulk, completing on one mbarrier per ring slot) of the GEMV / GATE_UP
// weight segments the block will read, up to `n_stages` stages ahead of the tiles. With the
// static schedule the block's task list is known, so the stream runs on into the next tasks
// (across dependency waits: weights never change during a launch); with tickets it covers the
// claimed task. The tiles consume stages in the same order, then free the slot for warp 0 to
// refill. Data in the ring is only an earlier copy of the weights, so the arithmetic is the
// one of the register path.
#pragma once
#include <stdint.h>

#include "megakernel/device_failure.cuh"
#include "megakernel/device_records.h"
#include "megakernel/tile_layout.h"

namespace spindle::cuda {

__device__ __forceinline__ uint32_t smem_address(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
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
__device__ __forceinline__ void bulk_copy_to_shared(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar,
                                                    uint64_t policy, bool hint) {
  if (hint)
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(dst),
        "l"(src), "r"(bytes), "r"(bar), "l"(policy)
        : "memory");
  else
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

__device__ __forceinline__ StreamGeom stream_geom_of(const StreamTask& t) {
  return stream_geom(t.K, t.r1 - t.r0, t.w1 ? 2u : 1u);
}

__device__ __forceinline__ StreamTask load_stream_task(const StreamTask* p) {
  const uint4 a = __ldg(reinterpret_cast<const uint4*>(p)), b = __ldg(reinterpret_cast<const uint4*>(p) + 1);
  StreamTask t;
  t.w0 = (uint64_t(a.y) << 32) | a.x;
  t.w1 = (uint64_t(a.w) << 32) | a.z;
  t.row_bytes = b.x;
  t.K = b.y;
  t.r0 = b.z;
  t.r1 = b.w;
  return t;
}

// The producer's state, in shared memory: warp 0 reads it into registers for a fill, and lane 0
// writes it back, so the rest of the kernel keeps none of it in registers.
struct StreamState {
  StreamTask cur;            // the task being issued
  StreamGeom geom;           // of cur
  const StreamTask* list;    // static: the block's stream list, else nullptr
  uint8_t* ring;
  unsigned long long pos, end, policy;  // static: list position of cur, positions in the launch
  uint32_t len, stage, issued;           // list length; next stage of cur; stages issued
  uint32_t n, bars, live, hint;          // ring stages; barrier address; cur has stages left
};

class WeightStream {
 public:
  // Every thread; then the caller syncs the block before anything else touches the ring.
  // `state` and `bars` are shared memory.
  // `next` receives the record after cur's (static lists), copied there asynchronously.
  // `spin` polls the stages with test_wait (non-blocking) instead of try_wait.
  __device__ void init(const DeviceGraph& g, uint32_t n_stages, uint8_t* ring, StreamState* state, StreamTask* next,
                       uint64_t* bars, uint32_t launch_steps, bool evict_first, bool spin, uint64_t watchdog_ns) {
    s_ = state;
    next_ = next;
    consumed_ = 0;
    watchdog_ns_ = watchdog_ns;
    control_ = g.control;
    spin_ = spin;
    on_ = n_stages != 0;
    if (!on_ || threadIdx.x != 0) return;
    StreamState st{};
    st.n = n_stages;
    st.ring = ring;
    st.bars = smem_address(bars);
    for (uint32_t i = 0; i < n_stages; ++i) mbar_init(st.bars + 8 * i, 1);
    mbar_init_fence();
    st.hint = evict_first;
    st.policy = evict_first ? evict_first_policy() : 0;
    if (g.list_begin) {
      const uint32_t b = g.stream_list_begin[blockIdx.x], e = g.stream_list_begin[blockIdx.x + 1];
      st.list = g.stream_lists + b;
      st.len = e - b;
      st.end = uint64_t(launch_steps) * st.len;
      if (st.end != 0) {
        st.cur = load_stream_task(st.list);
        *next_ = load_stream_task(st.list + (st.end > 1 ? 1 % st.len : 0));
        st.geom = stream_geom_of(st.cur);
        st.live = 1;
      }
    }
    *s_ = st;
  }

  __device__ bool on() const { return on_; }

  // Warp 0, ticket schedule: the block claimed a task whose record is `t`; the producer had
  // issued every stage of its last one.
  __device__ void begin_task(const StreamTask& t) {
    __syncwarp();
    if ((threadIdx.x & 31u) == 0) {
      s_->cur = t;
      s_->geom = stream_geom_of(t);
      s_->stage = 0;
      s_->live = s_->geom.stages != 0;
    }
    __syncwarp();
  }

  // Warp 0 (all lanes, converged): issues stages until the ring is full or the known tasks
  // are all issued.
  __device__ void fill() {
    __syncwarp();
    StreamState st = *s_;
    bool changed = false;
    while (st.live && st.issued - consumed_ < st.n) {
      if (st.stage == st.geom.stages) {
        if (!st.list || !advance(st, next_)) st.live = 0;
        changed = true;
        continue;
      }
      issue(st);
      changed = true;
    }
    __syncwarp();
    if (changed && (threadIdx.x & 31u) == 0) *s_ = st;
    __syncwarp();
  }

  // Every thread: waits until the next stage has landed; returns its first byte. A stage
  // that does not land within the watchdog is a failure the host reports (the tile then
  // reads whatever the slot holds, and the block stops at its next claim).
  __device__ const uint8_t* wait_stage() const {
    const uint32_t n = s_->n, slot = consumed_ % n, parity = (consumed_ / n) & 1u;
    const uint32_t bar = s_->bars + 8 * slot;
    if (!landed(bar, parity)) {
      const uint64_t start = global_timer_ns();
      for (uint32_t spin = 1; !landed(bar, parity); ++spin)
        if ((spin & 1023u) == 0 && global_timer_ns() - start > watchdog_ns_) {
          if (threadIdx.x == 0)
            report_failure(control_, {kFailStream, blockIdx.x, 0, slot, consumed_, s_->issued});
          break;
        }
    }
    return s_->ring + size_t(slot) * kStreamStageBytes;
  }

  // Every thread, after its last read of the stage: frees the slot and refills the ring.
  __device__ void release_stage() {
    __syncthreads();
    ++consumed_;
    if (threadIdx.x < 32) fill();
  }

  // Warp 0, before the block exits: waits for copies still in flight into the ring (for as
  // long as the watchdog allows).
  __device__ void drain() {
    if ((threadIdx.x & 31u) == 0) asm volatile("cp.async.wait_all;" ::: "memory");
    __syncwarp();
    const uint32_t n = s_->n, issued = s_->issued, bars = s_->bars;
    const uint64_t start = global_timer_ns();
    for (uint32_t q = consumed_; q != issued; ++q)
      while (!mbar_try_wait(bars + 8 * (q % n), (q / n) & 1u))
        if (global_timer_ns() - start > watchdog_ns_) return;
  }

 private:
  // Static schedule, warp 0: the next task of the block's stream list, or false at the
  // launch's end. Its record was copied to `next` at the last advance (long done by now);
  // lane 0 starts the copy of the one after it, which nothing waits for until the next advance.
  __device__ static bool advance(StreamState& st, StreamTask* next) {
    if (++st.pos >= st.end) return false;
    const uint32_t lane = threadIdx.x & 31u;
    if (lane == 0) asm volatile("cp.async.wait_all;" ::: "memory");
    __syncwarp();
    st.cur = *next;
    __syncwarp();
    if (lane == 0 && st.pos + 1 < st.end) {
      const StreamTask* src = st.list + (st.pos + 1) % st.len;
      const uint32_t dst = smem_address(next);
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst + 16), "l"(reinterpret_cast<const uint8_t*>(src) + 16)
                   : "memory");
      asm volatile("cp.async.commit_group;" ::: "memory");
    }
    st.geom = stream_geom_of(st.cur);
    st.stage = 0;
    return true;  // fill() moves on again if the task had no stages
  }

  // One stage: a copy per row-unit segment, or, when the stage's rows are whole and back to
  // back in both places, one copy per unit.
  __device__ static void issue(StreamState& st) {
    const uint32_t lane = threadIdx.x & 31u;
    const uint32_t slot = st.issued % st.n, bar = st.bars + 8 * slot;
    const uint32_t dst = smem_address(st.ring + size_t(slot) * kStreamStageBytes);
    const StreamStage s = stream_stage(st.geom, st.stage);
    const uint32_t units = st.geom.units, bytes = s.len * 2u;
    if (lane == 0) mbar_arrive_expect_tx(bar, s.rows_in * units * bytes);
    __syncwarp();
    const uint64_t first_row = st.cur.r0 + s.row_first;
    if (st.geom.packed && st.cur.row_bytes == bytes) {
      for (uint32_t u = lane; u < units; u += 32)
        bulk_copy_to_shared(dst + stream_slot(st.geom, 0, u) * 2u,
                            reinterpret_cast<const void*>((u ? st.cur.w1 : st.cur.w0) + first_row * st.cur.row_bytes),
                            s.rows_in * bytes, bar, st.policy, st.hint != 0);
    } else {
      for (uint32_t q = lane; q < s.rows_in * units; q += 32) {
        const uint32_t row = q / units, u = q % units;
        const uint64_t src = (u ? st.cur.w1 : st.cur.w0) + (first_row + row) * st.cur.row_bytes + uint64_t(s.e0) * 2u;
        bulk_copy_to_shared(dst + stream_slot(st.geom, row, u) * 2u, reinterpret_cast<const void*>(src), bytes, bar,
                            st.policy, st.hint != 0);
      }
    }
    __syncwarp();
    ++st.stage;
    ++st.issued;
  }

  __device__ bool landed(uint32_t bar, uint32_t parity) const {
    return spin_ ? mbar_test_wait(bar, parity) : mbar_try_wait(bar, parity);
  }

  StreamState* s_ = nullptr;
  StreamTask* next_ = nullptr;
  RunControl* control_ = nullptr;
  uint32_t consumed_ = 0;  // stages every thread has consumed
  bool on_ = false, spin_ = false;
  uint64_t watchdog_ns_ = 0;
};

}  // namespace spindle::cuda

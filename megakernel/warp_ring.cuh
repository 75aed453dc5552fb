// The persistent kernel's weight read for GEMV and GATE_UP (bench/weight_read_bench.cu and
// docs/JOURNAL.md measured the choices): every warp streams its own rows of the task through a
// ring of kRingSlots slots in shared memory with cp.async, kRingSlots - 1 pieces ahead. A
// piece is up to kRingGroup dot blocks (256 elements) of one weight row; lane l copies, and
// later reads back, only its own 16 bytes of each block, so no barrier is needed: each lane's
// cp.async.wait_group is its whole synchronisation. The first pieces are issued before the
// task's dependency wait ("priming"): weights never change during a launch, so they are on
// their way while the block waits for its input. The dots are the canonical ones of the
// register path (device_dot.cuh), in the same order.
#pragma once
#include <stdint.h>

#include "megakernel/device_dot.cuh"
#include "megakernel/tile_layout.h"
#include "megakernel/weight_stream.cuh"
#include "ops/context.h"

namespace spindle::cuda {

// One warp's share of a projection task: its rows tile_begin + warp, + 8, … below tile_end,
// each of `units` weight rows (GEMV 1; GATE_UP 2: gate, up). Piece q is (row i, unit u,
// group g), g fastest.
struct WarpPieces {
  const bf16* unit[2];  // the unit's row tile_begin + warp
  uint64_t row_step;    // elements from one of the warp's rows to its next
  uint32_t units, blocks, groups, rows, pieces;
};

// Whether the ring can read the projection's weights: whole dot blocks, 16-byte aligned rows.
__device__ __forceinline__ bool ring_reads(const SpView& w, const bf16* data) {
  return w.cols % kDotBlockElems == 0 && w.row_stride % kDotVec == 0 && aligned16(data);
}

// The task's pieces for the calling warp, or units == 0 when the ring cannot read them (the
// tile then uses the register path).
__device__ __forceinline__ WarpPieces warp_pieces(const SpTask& t, const TileContext& c) {
  WarpPieces p{};
  const bool gate_up = t.op == SP_OP_GATE_UP;
  if (t.op != SP_OP_GEMV && !gate_up) return p;
  const SpView& w = c.views[t.operand[0]];
  const bf16* w0 = view_data<const bf16>(c, t.operand[0]);
  const bf16* w1 = gate_up ? view_data<const bf16>(c, t.operand[1]) : w0;
  if (!ring_reads(w, w0) || (gate_up && !ring_reads(c.views[t.operand[1]], w1))) return p;
  const uint32_t first = t.tile_begin + warp_id();
  p.units = gate_up ? 2u : 1u;
  p.row_step = uint64_t(kTileWarps) * w.row_stride;
  p.unit[0] = w0 + uint64_t(first) * w.row_stride;
  p.unit[1] = w1 + uint64_t(first) * (gate_up ? c.views[t.operand[1]].row_stride : w.row_stride);
  p.blocks = w.cols / kDotBlockElems;
  p.groups = (p.blocks + kRingGroup - 1) / kRingGroup;
  p.rows = first < t.tile_end ? (t.tile_end - first + kTileWarps - 1) / kTileWarps : 0u;
  p.pieces = p.rows * p.units * p.groups;
  return p;
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}

class WarpRing {
 public:
  // `ring` is the block's ring (kTileWarps x kRingWarpBytes of shared memory).
  __device__ explicit WarpRing(uint8_t* ring) : slots_(ring + warp_id() * kRingWarpBytes + lane_id() * 16u) {}

  // Issues piece q into its slot, then commits a group (an empty one past the last piece, so
  // that wait_group counts pieces).
  __device__ __forceinline__ void issue(const WarpPieces& p, uint32_t q) const {
    if (q < p.pieces) {
      const uint32_t g = q % p.groups, u = (q / p.groups) % p.units, i = q / (p.groups * p.units);
      const bf16* src = p.unit[u] + i * p.row_step + (g * kRingGroup * kDotBlockElems + lane_id() * kDotVec);
      const uint32_t dst = smem_address(slots_ + (q % kRingSlots) * kRingPieceBytes);
      const uint32_t n = min(kRingGroup, p.blocks - g * kRingGroup);
#pragma unroll
      for (uint32_t j = 0; j < kRingGroup; ++j)
        if (j < n) cp_async16(dst + j * kDotBlockElems * 2u, src + j * kDotBlockElems);
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  }

  // The first kRingSlots - 1 pieces.
  __device__ void prime(const WarpPieces& p) const {
    for (uint32_t q = 0; q + 1 < kRingSlots; ++q) issue(p, q);
  }

  // After prime(p): runs the warp's pieces in order against the input `n` (K bf16 in shared
  // memory), calling done(i, u, dot) with every lane when row i's unit u is complete.
  template <class Done>
  __device__ __forceinline__ void run(const WarpPieces& p, const bf16* n, Done&& done) const {
    float acc = 0.0f;
    const bf16* lane_n = n + lane_id() * kDotVec;
    for (uint32_t q = 0; q < p.pieces; ++q) {
      issue(p, q + kRingSlots - 1);
      asm volatile("cp.async.wait_group %0;" ::"n"(kRingSlots - 1) : "memory");
      const uint8_t* slot = slots_ + (q % kRingSlots) * kRingPieceBytes;
      const uint32_t g = q % p.groups, n_blocks = min(kRingGroup, p.blocks - g * kRingGroup);
      const bf16* in = lane_n + g * kRingGroup * kDotBlockElems;
#pragma unroll
      for (uint32_t j = 0; j < kRingGroup; ++j)
        if (j < n_blocks) {
          float b[8];
          unpack_bf16x8(load16<Src::Shared>(in + j * kDotBlockElems), b);
          accumulate_bf16x8(acc, load16<Src::Shared>(slot + j * kDotBlockElems * 2u), b);
        }
      if (g + 1 == p.groups) {
        done(q / (p.groups * p.units), (q / p.groups) % p.units, warp_butterfly_sum(acc));
        acc = 0.0f;
      }
    }
  }

 private:
  uint8_t* slots_;  // this lane's 16 bytes in the warp's first slot
};

}  // namespace spindle::cuda

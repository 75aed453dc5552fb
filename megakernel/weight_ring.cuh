// A block's weights streamed through shared memory (docs/two-hop-layer.md, "the ring"): the
// block reads its weights as one sequence of chunks of at most kRingChunkBytes, known ahead, and
// chunk j lands in slot j % slots by a bulk copy, completing phase j / slots of the slot's
// mbarrier. The caller gives the slot (and the phase's parity): it divides once a chunk, by a
// multiply-high, where each accessor dividing again cost the phases' paths.
// The last reader of a chunk starts the copy of the chunk `slots` places later into
// the freed slot, so as many chunks are in flight or landed ahead of the readers as there are
// slots, with no producer warp. (The cluster kernel holds a release back when the chunk `slots`
// later is read only after its next hop: release_deferred.)
//
// The hand-off, by the PTX memory model's rules (its cost: docs/two-hop-layer.md):
//  * a reading warp's lanes load from the slot, then __syncwarp orders their loads before lane
//    0's increment of the slot's count, which releases them (acq_rel, the block's scope); a
//    warp's increments held back may be made by another warp's lane, after a block barrier
//    that follows the loads (the cluster kernel's release_queues_from);
//  * the increment that completes the count acquires every reader's release (the increments
//    form one release sequence), and its thread then fences the generic proxy against the async
//    one (fence.proxy.async) before the bulk copy, another proxy's writes, refills the slot;
//  * the refill's tag is stored with release after that, and a reader loads it with acquire
//    before it tests the mbarrier's phase: a reader that sees the new tag sees the mbarrier no
//    older than the previous fill's completion, so a parity that matches is this fill's; the
//    phase's completion, seen by test_wait (acquire), makes the copy's bytes visible.
#pragma once
#include <stdint.h>

#include "megakernel/ptx.cuh"
#include "megakernel/tile_layout.h"

namespace spindle::cuda {

struct WeightRing {
  uint8_t* slot0;      // slot s at slot0 + s * kRingChunkBytes (generic address)
  uint32_t slot0_at;   // the same, as a shared-window address
  uint32_t bars_at;    // shared address of slot 0's mbarrier (8 bytes a slot)
  uint32_t* tag;       // the chunk each slot holds or is receiving (~0u: none yet)
  uint32_t* released;  // readers done with the chunk a slot holds
  uint32_t slots;

  __device__ uint32_t bar(uint32_t slot) const { return bars_at + 8u * slot; }
  __device__ uint8_t* data(uint32_t slot) const { return slot0 + size_t(slot) * kRingChunkBytes; }
  __device__ uint32_t address(uint32_t slot) const { return slot0_at + slot * kRingChunkBytes; }

  // Before any fill, by one thread (the mbarriers' init still needs its fence and a barrier).
  __device__ void init() const {
    for (uint32_t s = 0; s < slots; ++s) {
      tag[s] = ~0u;
      released[s] = 0;
      mbar_init(bar(s), 1);
    }
  }

  // Starts copying `bytes` (a multiple of 16) from src into `chunk`'s slot, by one thread, once
  // every reader of the chunk `slots` places before it has released it (release: the thread
  // has acquired their loads).
  __device__ void fill(uint32_t chunk, uint32_t slot, const void* src, uint32_t bytes) const {
    // Every address first: after each asm's memory clobber the members would be loaded again,
    // one shared load after another on the refilling warp's path.
    const uint32_t at = smem_address(tag + slot), b = bar(slot), to = address(slot);
    fence_proxy_async_shared();
    st_release_shared_u32(at, chunk);
    mbar_arrive_expect_tx(b, bytes);
    bulk_copy_to_shared(to, src, bytes, b);
  }

  // Whether `chunk` has landed in its slot, whose mbarrier phase it completes has `parity`. The
  // tag first: the parity alone cannot tell `chunk` from the chunk two fills before it, which a
  // reader running ahead could otherwise see. Both by the shared window's address: a generic
  // access to shared memory is slower, and a volatile one through the generic address is a
  // system-scope load (LD.E.STRONG.SYS), which Nsight Compute put at a quarter of
  // `stream_dots`' warp samples.
  __device__ bool landed(uint32_t chunk, uint32_t slot, uint32_t parity) const {
    return ld_acquire_shared_u32(smem_address(tag + slot)) == chunk && mbar_test_wait(bar(slot), parity);
  }

  // Waits for the copies a failed run left in flight (each slot's last fill): a block must not
  // exit with a bulk copy still writing its shared memory.
  __device__ void drain() const {
    for (uint32_t s = 0; s < slots; ++s) {
      const uint32_t chunk = tag[s];
      if (chunk != ~0u)
        while (!mbar_test_wait(bar(s), (chunk / slots) & 1u)) {
        }
    }
  }

  // One of `readers` is done with the chunk in `slot` (one lane for its warp, after the warp's
  // __syncwarp): true for the last, which has then acquired every reader's loads and fills the
  // slot again. By the shared window's address (a generic atomic on shared memory is slower).
  __device__ bool release(uint32_t slot, uint32_t readers) const {
    const uint32_t r = smem_address(released + slot);
    if (atom_shared_increment_acq_rel_u32(r) + 1u != readers) return false;
    st_shared_zero_u32(r);
    return true;
  }
};

}  // namespace spindle::cuda

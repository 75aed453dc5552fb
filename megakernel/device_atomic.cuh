// Device-scope atomics on plain u32 words (counters, the abort flag), with explicit memory
// orders: acquire to wait, release to signal (acquire-release when the signaller reads the sum).
#pragma once
#include <stdint.h>

#include <cuda/atomic>

namespace spindle::cuda {

using DeviceAtomic = ::cuda::atomic_ref<uint32_t, ::cuda::thread_scope_device>;
constexpr auto kAcquire = ::cuda::memory_order_acquire;
constexpr auto kRelease = ::cuda::memory_order_release;
constexpr auto kAcqRel = ::cuda::memory_order_acq_rel;
constexpr auto kRelaxed = ::cuda::memory_order_relaxed;

}  // namespace spindle::cuda

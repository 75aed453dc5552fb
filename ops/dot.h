// The canonical reduction order. Every executor sums a dot product the same way, so results
// are bit-identical across the CPU executors, the CUDA megakernel and the Vulkan shader:
// 32 lanes; lane l owns elements [256*j + 8*l, 256*j + 8*l + 8) for j = 0, 1, …, adding
// each product (rounded, not fused) to its own accumulator in increasing k; then a
// butterfly: for off = 16, 8, 4, 2, 1, lane l += lane l+off. This is one warp's natural
// order with 16-byte loads; the host code below emulates it.
#pragma once
#include "tasks/host_device.h"

namespace spindle {

constexpr int kDotLanes = 32;
constexpr int kDotVec = 8;
constexpr int kDotBlock = kDotLanes * kDotVec;

// Sums the lanes' partials in butterfly order; lane[0] holds the result.
template <class Acc>
SP_HDI Acc butterfly_sum(Acc (&lane)[kDotLanes]) {
  for (int off = kDotLanes / 2; off > 0; off /= 2)
    for (int l = 0; l < off; ++l) lane[l] = lane[l] + lane[l + off];
  return lane[0];
}

// sum_k a(k) * b(k) for k in [0, n), in the canonical order. a and b return values
// convertible to Acc (widened bf16, f32 or f64).
template <class Acc, class A, class B>
inline Acc canonical_dot(int n, A a, B b) {
  Acc lane[kDotLanes] = {};
  for (int base = 0; base < n; base += kDotBlock)
    for (int l = 0; l < kDotLanes; ++l)
      for (int e = 0; e < kDotVec; ++e) {
        const int k = base + l * kDotVec + e;
        if (k < n) lane[l] = lane[l] + Acc(a(k)) * Acc(b(k));
      }
  return butterfly_sum(lane);
}

}  // namespace spindle

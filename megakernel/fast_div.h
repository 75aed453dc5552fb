// Division by a divisor known only at run time, as a multiply-high and a shift (the method of
// CUTLASS's FastDivmod: m = ceil(2^p / d), p = 31 + ceil(log2 d)): exact for every dividend
// below 2^31. The cluster program's dividends are a launch's chunk indices (steps x chunks a
// step: ~830 a step for a qwen3-0.6b block, so ~2.5 million steps a launch; nothing checks it).
// A division by a run-time value is ~18 instructions on the GPU, a dependent chain through the
// MUFU unit; the cluster program's ring divides by its slot count and its step's and layer's
// chunk counts at every chunk (~10% of its instructions; those chains were on every phase's
// path).
#pragma once
#include <stdint.h>

#include "tasks/host_device.h"

namespace spindle {

struct FastDiv {
  uint32_t d, m, s;  // d == 1: the quotient is x itself (m and s unused); of(0) is taken as of(1)

  SP_HD static FastDiv of(uint32_t d) {
    if (d <= 1) return {1, 0, 0};
    uint32_t l = 0;  // ceil(log2 d)
    while ((uint64_t(1) << l) < d) ++l;
    const uint32_t p = 31 + l;
    return {d, uint32_t(((uint64_t(1) << p) + d - 1) / d), p - 32};
  }
  // x / d for x < 2^31.
  SP_HD uint32_t div(uint32_t x) const {
#ifdef __CUDA_ARCH__
    const uint32_t hi = __umulhi(x, m);
#else
    const uint32_t hi = uint32_t((uint64_t(x) * m) >> 32);
#endif
    return d == 1 ? x : hi >> s;
  }
  // x % d for x < 2^31.
  SP_HD uint32_t mod(uint32_t x) const { return x - div(x) * d; }
};

}  // namespace spindle

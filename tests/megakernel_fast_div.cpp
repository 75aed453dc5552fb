// FastDiv (megakernel/fast_div.h) against the plain division, for every divisor up to 4096 and
// the divisors the cluster program's ring uses, at fresh random dividends and the edges below
// 2^31. The GPU's __umulhi and the host's 64-bit product give the same high word.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "megakernel/fast_div.h"

using spindle::FastDiv;

TEST_CASE("FastDiv gives x / d and x % d for every dividend below 2^31") {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<uint32_t> any(0, (1u << 31) - 1);
  std::vector<uint32_t> divisors;
  for (uint32_t d = 1; d <= 4096; ++d) divisors.push_back(d);
  for (uint32_t d : {65535u, 65536u, 1000003u, (1u << 30) + 1, (1u << 31) - 1}) divisors.push_back(d);
  uint64_t checked = 0, wrong = 0;
  for (uint32_t d : divisors) {
    const FastDiv f = FastDiv::of(d);
    std::vector<uint32_t> xs = {0, 1, d - 1, d, d + 1, (1u << 31) - 1, (1u << 31) - d, (1u << 31) - 1 - d};
    for (int i = 0; i < 64; ++i) xs.push_back(any(rng));
    for (uint32_t x : xs) {
      if (x >= (1u << 31)) continue;
      ++checked;
      if (f.div(x) != x / d || f.mod(x) != x % d) {
        if (wrong++ == 0) {  // the first one, in full
          CAPTURE(d);
          CAPTURE(x);
          CHECK(f.div(x) == x / d);
          CHECK(f.mod(x) == x % d);
        }
      }
    }
  }
  CHECK(checked > 4096 * 64);
  CHECK(wrong == 0);
}

// EMBED (ops/embed.h): a column range of one table row.
#include <doctest/doctest.h>

#include "ops/embed.h"
#include "tests/ops_reference.h"

using namespace spindle;
using namespace spindle::test;

TEST_CASE("embed_columns: copies a column range of the token row") {
  std::mt19937 rng(12);
  const uint32_t V = 50, H = 70, stride = 75;
  const std::vector<bf16> table = random_bf16(rng, size_t(V) * stride);
  std::vector<bf16> out(H, 0xffff);
  embed_columns(table.data(), stride, 33, 10, 40, out.data());
  for (uint32_t c = 0; c < H; ++c) CHECK(out[c] == (c >= 10 && c < 40 ? table[33 * stride + c] : 0xffff));
}

// EMBED (docs/numerics.md): a copy of row `token` of the embedding table.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "ops/bf16.h"
#include "tasks/host_device.h"

namespace spindle {

// out[c] = table[token, c] for c in [c0, c1).
SP_HDI void embed_columns(const bf16* table, size_t row_stride, uint32_t token, uint32_t c0,
                          uint32_t c1, bf16* out) {
  const bf16* row = table + size_t(token) * row_stride;
  for (uint32_t c = c0; c < c1; ++c) out[c] = row[c];
}

}  // namespace spindle

// A GEMV's split (opcodes.h, operand 7): each row's dot summed from `pieces` dots over K /
// pieces columns each, `group` pieces at a time (ops/gemv.h split_row_dot). One piece is the
// plain canonical dot.
#pragma once
#include <stdint.h>

#include "tasks/host_device.h"

namespace spindle {

struct GemvSplit {
  uint32_t pieces = 1, group = 1;
};

// The split an operand word asks for: bits 0..15 the pieces (0 or 1: none), bits 16..31 the
// pieces a group (0: all of them).
SP_HD inline GemvSplit gemv_split(uint32_t word) {
  const uint32_t pieces = word & 0xFFFFu, group = word >> 16;
  if (pieces < 2) return {};
  return {pieces, group ? group : pieces};
}

// The operand word for a split (pieces < 2: none).
inline uint32_t gemv_split_word(uint32_t pieces, uint32_t group) { return pieces < 2 ? 0u : pieces | group << 16; }

// Why a split word cannot apply to rows of K elements, or nullptr when it can: the pieces must
// cut K into whole octets (8 bf16, 16 bytes: every executor reads a piece from its own first
// column with aligned loads), and the groups must cut the pieces.
inline const char* gemv_split_problem(uint32_t word, uint32_t K) {
  const uint32_t pieces = word & 0xFFFFu, group = word >> 16;
  if (pieces < 2) return group > 1 ? "the split has groups but fewer than 2 pieces" : nullptr;
  if (K % pieces) return "the split's pieces do not divide the row length";
  if (K / pieces % 8u) return "the split's pieces are not whole octets (a multiple of 8 columns each)";
  if (group && pieces % group) return "the split's groups do not divide its pieces";
  return nullptr;
}

}  // namespace spindle

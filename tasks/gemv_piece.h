// A GEMV piece task (opcodes.h SP_OP_GEMV_PIECE): which piece it computes, its split and its
// rows' arrivals word, and why one cannot run, shared by validate() and every executor's checks.
#pragma once
#include <stdint.h>

#include "tasks/gemv_split.h"
#include "tasks/task.h"
#include "tasks/view.h"

namespace spindle {

struct GemvPiece {
  uint32_t index;  // j: the piece's columns are [j K/S, (j + 1) K/S) of the whole row
  uint32_t word;   // the rows' arrivals word
  GemvSplit split;
};

SP_HD inline GemvPiece gemv_piece(const SpTask& t) {
  return {t.operand[6] & 0xFFFFu, t.operand[6] >> 16, gemv_split(t.operand[7])};
}

// The operand word 6 of piece j whose rows count in arrivals word `word`.
inline uint32_t gemv_piece_word(uint32_t j, uint32_t word) { return j | word << 16; }

// Why the piece task `t` cannot run over its operands' views (`views`: the table its operand
// words index), or nullptr when it can.
inline const char* gemv_piece_problem(const SpTask& t, const SpView* views) {
  const GemvPiece p = gemv_piece(t);
  const SpView &W = views[t.operand[0]], &x = views[t.operand[1]], &out = views[t.operand[2]];
  const SpView &partials = views[t.operand[4]], &arrivals = views[t.operand[5]];
  if (p.split.pieces < 2) return "the split has fewer than 2 pieces";
  if (p.split.pieces % p.split.group) return "the split's groups do not divide its pieces";
  if (p.index >= p.split.pieces) return "the piece is not one of the split's";
  if (W.dtype != SP_BF16 || x.dtype != SP_BF16 || out.dtype != SP_BF16) return "W, x and out are not bf16";
  if (W.cols % 8u) return "the piece is not whole octets (a multiple of 8 columns), as a split's pieces are";
  if (uint64_t(x.rows) * x.cols < W.cols) return "x holds fewer elements than a row of the piece";
  if (t.tile_end > W.rows || uint64_t(out.rows) * out.cols < t.tile_end) return "the rows are past W's or out's";
  if (t.operand[3] != SP_NO_VIEW) {
    const SpView& residual = views[t.operand[3]];
    if (residual.dtype != SP_BF16 || uint64_t(residual.rows) * residual.cols < t.tile_end)
      return "the residual is not bf16 rows for every output row";
  }
  if (partials.dtype != SP_F32 || partials.rows < p.split.pieces || partials.cols < t.tile_end)
    return "the partials are not f32 rows for every piece, as wide as the rows";
  if (arrivals.dtype != SP_U32 || uint64_t(arrivals.rows) * arrivals.cols <= p.word)
    return "the arrivals word is past the arrivals view";
  return nullptr;
}

}  // namespace spindle

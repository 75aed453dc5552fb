// The shape of an MLP gang task (opcodes.h SP_OP_MLP) and why one cannot run, shared by
// validate() and every executor's checks.
#pragma once
#include <stdint.h>

#include "tasks/gang.h"
#include "tasks/view.h"

namespace spindle {

struct MlpShape {
  uint32_t H, I;    // hidden and intermediate sizes (Wd's rows and columns)
  uint32_t piece;   // P: intermediate columns a member holds
  uint32_t width;   // members a gang
  uint32_t pieces;  // I / P
  uint32_t gangs;   // pieces / width
  uint32_t index;   // this record's piece
  uint32_t gang;    // this record's gang
};

SP_HD inline MlpShape mlp_shape(const SpTask& t, const SpView& Wd) {
  MlpShape s{};
  s.H = Wd.rows;
  s.I = Wd.cols;
  s.piece = t.tile_end - t.tile_begin;
  s.width = sp_gang_width(t);
  s.pieces = s.piece ? s.I / s.piece : 0u;
  s.gangs = s.pieces / s.width;
  s.index = s.piece ? t.tile_begin / s.piece : 0u;
  s.gang = s.index / s.width;
  return s;
}

// Why the MLP task `t` cannot run over its operands' views (`views`: the table its operand words
// index), or nullptr when it can.
inline const char* mlp_problem(const SpTask& t, const SpView* views) {
  const SpView &Wg = views[t.operand[0]], &Wu = views[t.operand[1]], &Wd = views[t.operand[2]];
  const SpView &hidden = views[t.operand[3]], &norm = views[t.operand[4]];
  const SpView &partials = views[t.operand[5]], &arrivals = views[t.operand[6]];
  const MlpShape s = mlp_shape(t, Wd);
  if (Wg.dtype != SP_BF16 || Wu.dtype != SP_BF16 || Wd.dtype != SP_BF16 || hidden.dtype != SP_BF16 ||
      norm.dtype != SP_BF16)
    return "gate, up, down, hidden and the norm weights are not bf16";
  if (s.H == 0) return "down has no rows";
  if (Wg.rows != s.I || Wg.cols != s.H || Wu.rows != s.I || Wu.cols != s.H)
    return "gate and up are not [I, H] for down's [H, I]";
  if (Wu.row_stride != Wg.row_stride) return "up's rows are not as far apart as gate's (both are read with gate's)";
  if (uint64_t(hidden.rows) * hidden.cols < s.H) return "hidden holds fewer than H elements";
  if (uint64_t(norm.rows) * norm.cols < s.H) return "the norm weights are fewer than H";
  if (s.piece == 0 || t.tile_end > s.I) return "the columns are not within the intermediate size";
  if (s.piece % 8u) return "a piece is not whole octets (a multiple of 8 columns)";
  if (s.I % (uint64_t(s.piece) * s.width)) return "the gangs' pieces do not cut the intermediate size";
  if (t.tile_begin % s.piece) return "the columns do not start a piece";
  if (s.index % s.width != (s.width > 1 ? t.gang_rank : 0u))
    return "the rank is not the piece's place in its gang";
  if (partials.dtype != SP_F32 || partials.rows < s.pieces + s.gangs || partials.cols < s.H)
    return "the partials are not f32 rows for every piece and gang, H wide";
  if (arrivals.dtype != SP_U32 || uint64_t(arrivals.rows) * arrivals.cols < s.width)
    return "the arrivals hold fewer u32 words than the gang has members";
  return nullptr;
}

}  // namespace spindle

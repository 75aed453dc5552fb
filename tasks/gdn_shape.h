// The shape of a GDN record (opcodes.h SP_OP_GDN) read from its views, and the heads and state
// rows it runs, shared by validate() and every executor.
#pragma once
#include <stdint.h>

#include "tasks/gang.h"
#include "tasks/view.h"

namespace spindle {

struct GdnShape {
  uint32_t C, Kc;      // conv channels and taps
  uint32_t Hk, Hv;     // key and value heads
  uint32_t dk, dv;     // key and value head sizes
  uint32_t width;      // members of the record's gang, 1 for none
  uint32_t head;       // the record's first value head
  uint32_t heads;      // its heads: whole ones, or the one its gang shares
  uint32_t row, rows;  // its state rows of `head` when it is a gang member (row + rows <= dv)
};

// The sizes validate() checked (tasks/op_decls.cpp check_gdn) come from the views: C = conv
// rows, Kc = conv columns, Hv = A_log's elements, dv = the norm's, dk = the state's columns.
SP_HD inline GdnShape gdn_shape(const SpTask& t, const SpView* views) {
  GdnShape s{};
  s.C = views[t.operand[1]].rows;
  s.Kc = views[t.operand[1]].cols;
  s.Hv = views[t.operand[2]].cols;
  s.dv = views[t.operand[4]].cols;
  s.dk = views[t.operand[6]].cols;
  s.Hk = s.dk && s.C > s.Hv * s.dv ? (s.C - s.Hv * s.dv) / (2 * s.dk) : 0u;
  s.width = sp_gang_width(t);
  if (s.dv == 0) return s;
  s.head = t.tile_begin / s.dv;
  s.heads = s.width > 1 ? 1u : (t.tile_end - t.tile_begin) / s.dv;
  s.row = t.tile_begin % s.dv;
  s.rows = s.width > 1 ? t.tile_end - t.tile_begin : s.dv;
  return s;
}

}  // namespace spindle

// What a tile sees when it runs: the graph's dimensions and view table, the arena bases the
// executor bound, the step state, and the op parameter records.
#pragma once
#include <stdint.h>

#include "tasks/graph_params.h"
#include "tasks/host_device.h"
#include "tasks/op_params.h"
#include "tasks/step_state.h"
#include "tasks/task.h"
#include "tasks/view.h"

namespace spindle {

struct TileContext {
  const SpGraphParams* params;
  const SpView* views;
  uint8_t* const* arenas;  // base address of each arena, indexed by SpView::arena
  SpStepState* state;
  const SpOpParams* op_params;  // the graph's op parameter records (tasks/op_params.h)
};

// The typed op parameter record that task t's operand k names (tasks/op_params.h).
template <class Record>
SP_HDI const Record& operand_params(const SpTask& t, const TileContext& c, uint32_t k) {
  return sp_op_record<Record>(c.op_params[t.operand[k]]);
}

template <class T>
SP_HDI T* view_data(const TileContext& c, uint32_t view) {
  const SpView& v = c.views[view];
  const uint64_t off = (uint64_t(v.offset_hi) << 32) | v.offset_lo;
  return reinterpret_cast<T*>(c.arenas[v.arena] + off);
}

}  // namespace spindle

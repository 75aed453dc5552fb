// The task graph: tasks in a topological order, the view table, the arenas the views point
// into, the counters, and the names that make dumps and traces readable.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tasks/graph_params.h"
#include "tasks/op_params.h"
#include "tasks/step_state.h"
#include "tasks/task.h"
#include "tasks/view.h"

namespace spindle {

struct ArenaInfo {
  std::string name;
  uint64_t bytes = 0;
};

// Views the host reads or writes around a run.
struct GraphIo {
  uint32_t logits = SP_NO_VIEW;         // [V] f32
  uint32_t forced_tokens = SP_NO_VIEW;  // [max_steps] u32
  uint32_t out_tokens = SP_NO_VIEW;     // [max_steps] u32
};

struct Graph {
  static constexpr uint32_t kVersion = 9;

  std::string model;                    // what it was built from ("synthetic:tiny", a path)
  SpGraphParams params{};
  std::vector<SpTask> tasks;            // topological order: a task only waits on earlier ones
  std::vector<SpView> views;
  std::vector<std::string> view_names;  // one per view
  std::vector<ArenaInfo> arenas;        // index = SpArena / weight arena id
  std::vector<std::string> counter_names;  // one per counter (a stage, e.g. "L3.qkv")
  std::vector<SpOpParams> op_params;    // the records tasks' "params" operands index (op_params.h)
  GraphIo io;

  uint32_t num_counters() const { return static_cast<uint32_t>(counter_names.size()); }
};

// Throws spindle::Error naming the first inconsistency: unknown opcode, view or counter out
// of range, a view past its arena, a task that would read or write outside its views or that
// the graph's dimensions cannot serve (tasks/operand_bounds.h), a wait on a counter signalled
// by a different number of tasks, or a same-step wait on a counter signalled later in the
// order. A graph it accepts keeps every executor inside the graph's arenas.
void validate(const Graph& g);

}  // namespace spindle

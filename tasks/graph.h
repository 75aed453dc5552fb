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
  static constexpr uint32_t kVersion = 11;
  // task_device's entry of a task every device runs (the embedding, norms, the sampler…).
  static constexpr uint32_t kEveryDevice = 0xFFFFFFFFu;
  // Devices a step may be split over: more than one host's GPUs (8, or 72 in an NVL72 rack), few
  // enough that a graph file cannot make the CPU simulation hold its arenas thousands of times.
  static constexpr uint32_t kMaxDevices = 256;

  std::string model;                    // what it was built from ("synthetic:tiny", a path)
  SpGraphParams params{};
  std::vector<SpTask> tasks;            // topological order: a task only waits on earlier ones
  std::vector<SpView> views;
  std::vector<std::string> view_names;  // one per view
  std::vector<ArenaInfo> arenas;        // index = SpArena / weight arena id
  std::vector<std::string> counter_names;  // one per counter (a stage, e.g. "L3.qkv")
  std::vector<SpOpParams> op_params;    // the records tasks' "params" operands index (op_params.h)
  GraphIo io;

  // A step split over several devices (docs/multi-device.md): each device runs the tasks whose
  // task_device entry names it or kEveryDevice, over its own STATE, WORK, KV and RECURRENT
  // arenas and its own counters; the SYMMETRIC arena's views are every device's, and a signal of
  // a broadcast counter reaches that counter on every device. One device: both lists are empty.
  uint32_t devices = 1;
  std::vector<uint32_t> task_device;        // one per task when devices > 1
  std::vector<uint32_t> broadcast_counters;  // counter ids, ascending

  uint32_t num_counters() const { return static_cast<uint32_t>(counter_names.size()); }
  // Whether device d runs task i.
  bool runs_on(size_t i, uint32_t d) const {
    return task_device.empty() || task_device[i] == kEveryDevice || task_device[i] == d;
  }
  bool is_broadcast(uint32_t counter) const;
};

// Throws spindle::Error naming the first inconsistency: unknown opcode, view or counter out
// of range, a view past its arena, a task that would read or write outside its views or that
// the graph's dimensions cannot serve (tasks/operand_bounds.h), a wait on a counter signalled
// by a different number of tasks (on a device that runs the waiter), a same-step wait on a
// counter signalled later in the order, or, over several devices, a task of no device, a gang
// across devices, or a write into the symmetric arena that the other devices cannot wait for.
// A graph it accepts keeps every executor inside the graph's arenas.
void validate(const Graph& g);

}  // namespace spindle

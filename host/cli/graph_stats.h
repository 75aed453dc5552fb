// What one decode step of a graph touches, read from the graph's views rather than guessed
// from the config.
#pragma once
#include <cstdint>
#include <vector>

#include "tasks/graph.h"

namespace spindle::cli {

// Bytes of weights one step reads: everything in a weight arena that some task's operand
// covers, counted once, except the embedding table, of which a step reads one row, and the
// experts' fused weights, of which a step reads the k experts the router chooses in each MoE
// layer (k distinct experts: the same bytes whichever they are).
uint64_t weight_bytes_per_token(const Graph& g);

// Of those, the routed experts' bytes: what the chosen experts' rows take.
uint64_t routed_weight_bytes_per_token(const Graph& g);

// Bytes the K and V caches gain per position.
uint64_t kv_bytes_per_position(const Graph& g);

// Bytes of per-sequence recurrent state (the Gated DeltaNet layers' conv rings and delta-rule
// states): every step reads and writes all of it.
uint64_t recurrent_state_bytes(const Graph& g);

// Bytes a step moves that reads `kv_rows` K/V rows (position + 1): the weights it reads, those
// rows, and the recurrent state read and written.
double step_bytes(const Graph& g, double kv_rows);

// What one run of a task moves of those bytes at the step's `position`: the weights its tiles
// read (their rows of each matrix, the routed experts' rows, and the vectors such as norm
// weights it reads whole), the K/V rows before the position that its attention tiles read and
// the row at the position that it appends, and the recurrent state rows its tiles read and
// write back with the conv windows of their channels. Activations, partials and the step
// state, a few KiB that stay in cache, are not counted. A vector or K/V row that several
// tasks read counts in each, so a stage's sum may exceed its share of step_bytes.
struct TaskBytes {
  uint64_t read = 0, written = 0;
};
TaskBytes task_bytes(const Graph& g, const SpTask& t, uint32_t position);

// What each device's tasks move at `position` (task_bytes read and written, summed over the tasks
// it runs): one entry a device.
std::vector<uint64_t> device_bytes(const Graph& g, uint32_t position);

}  // namespace spindle::cli

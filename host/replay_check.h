// Whether a saved graph may run with a model's weights: what `--graph` checks before an executor
// binds the graph to the model (docs/graph-format.md, Replaying a saved graph).
#pragma once
#include "host/model_weights.h"
#include "tasks/graph.h"

namespace spindle {

// Throws spindle::Error naming the first thing in which `g` differs from what w's model
// provides, with both values:
// * the graph's context, more than the model's max_position_embeddings;
// * the params that are the model's dimensions (tasks/graph_param_fields.h: hidden, layers,
//   heads, head and rotary dims, intermediate, vocab, norm kind, rms_eps, rope_theta);
// * the weight arenas' count, names and sizes;
// * a view in a weight arena that is not a window of the tensor its name names ("NAME": the
//   whole tensor; "NAME.PART": rows of its rows, columns within a row), or not bf16: so no
//   weight view reads past its tensor, whatever arena sizes allow;
// * the op parameter records' model words (an MoE layer's experts, k, expert rows, flags; not
//   the partition's held experts and shared split) and the state the
//   model keeps (the STATE, KV, CONST and RECURRENT arenas: their sizes and their views in
//   order), against the graph the builder makes for w at g's context and max_steps.
// The rest may differ: the tasks, counters and tiling, the WORK arena, the context (a run's
// positions are then bound by it). validate(g) must have passed (load_graph runs it).
void check_replay(const Graph& g, const ModelWeights& w);

}  // namespace spindle

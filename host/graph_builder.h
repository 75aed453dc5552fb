// Turns one decode step of a model into a task graph (see docs/isa.md for the stages).
#pragma once
#include <cstdint>

#include "host/model_weights.h"
#include "tasks/gemv_split.h"
#include "tasks/graph.h"

namespace spindle {

// One task per worker of a 132-SM GPU and stage: a task boundary costs a persistent worker
// about 2 µs (docs/EXPERIMENTS.md), so a worker should meet one per stage.
constexpr uint32_t kDefaultStageTasks = 132;

struct BuildOptions {
  uint32_t context = 0;        // KV capacity in positions; 0 = the config's max_position
  uint32_t max_steps = 0;      // forced/out token capacity; 0 = context
  uint32_t attn_chunks = 0;    // chunks per kv head in attention; 0 = chosen from the context
                               // (attn_chunks_for_context)
  uint32_t attn_q_splits = 0;  // parts each kv head's q heads are split into, an attention task
                               // each; a schedule, not numerics; 0 = attn_q_splits_for
  uint32_t rows_per_tile = 0;  // rows per GEMV / GATE_UP task; 0 = chosen from the stage's
                               // rows and stage_tasks (rows_per_task_for)
  uint32_t stage_tasks = kDefaultStageTasks;  // GEMV / GATE_UP tasks a stage is split into, about
  // How o_proj's and down's row dots are summed (GEMV operand 7, ops/gemv.h split_row_dot):
  // from `pieces` dots over K / pieces columns, `group` pieces at a time (0: all of them);
  // pieces 0 = the plain canonical dot. Part of the numerics. The two-hop layer
  // (docs/two-hop-layer.md) sums o_proj over its kv heads and down over 128 blocks in gangs of 16.
  GemvSplit o_proj_split{}, down_split{};
  // The GDN layers' out_proj summed alike (the hybrid families).
  GemvSplit gdn_out_split{};
  // The routed experts' down dots summed alike, from pieces computed as tasks of their own
  // (EXPERT_DOWN_PIECE and EXPERT_DOWN_SUM, which the CPU executors and CUDA's per-op kernels
  // run), and the shared
  // expert's (PIECE_DOTS, added by EXPERT_DOWN_SUM).
  GemvSplit expert_down_split{};
  // The shared expert's down dots alike, split otherwise than the routed experts': pieces 0 = as
  // expert_down_split, 1 = the plain dot (its rows read whole by EXPERT_DOWN_SUM). With the
  // routed dots whole and {N, N}, the numerics of expert parallel over N devices.
  GemvSplit shared_down_split{0, 0};
  // Each layer's MLP as one stage of MLP gang tasks (tasks/opcodes.h SP_OP_MLP) when `pieces`
  // >= 2: `pieces` tasks of intermediate / pieces columns each, in gangs of `group` (0: all of
  // them; at most 255), whose bits are those of down_split = {pieces, group}. Excludes down_split.
  GemvSplit fused_mlp{};
  // Each layer's q, k and v rows as one stage a kv head, the attention tasks of kv head g
  // waiting for g's stage alone instead of the whole projection; and, when o_proj_split has one
  // piece a kv head, o_proj as pieces (tasks/opcodes.h SP_OP_GEMV_PIECE) whose piece g waits
  // for g's attention tasks alone. A schedule, not numerics: the bits of the graph without it
  // (but for the fp64 executor, which rounds each piece's dot to f32: docs/numerics.md).
  bool kv_head_waits = false;
  // Members of each GDN value head's gang (tasks/opcodes.h SP_OP_GDN): the head's state rows
  // shared over that many tasks, which the CUDA persistent kernel runs at once; 1 = a task
  // holds whole heads. A schedule, not numerics. 0 = gdn_gang_for.
  uint32_t gdn_gang = 0;
  // Devices the step is split over (docs/multi-device.md): each device computes its kv heads'
  // q, k, v and attention, its GDN key heads' projections and value heads, its share of every
  // dense MLP's rows, of every routed expert's rows, of the shared expert's and of the LM
  // head's; o_proj, down, the GDN out_proj and the experts' down (the shared expert's too) are
  // row-parallel, each dot split into a piece a device (PIECE_DOTS, EXPERT_DOWN_PIECE) summed on
  // every device (PIECE_SUM, EXPERT_DOWN_SUM): the bits of the one-device graph with
  // o_proj_split = down_split = gdn_out_split = expert_down_split = {devices, devices}. The
  // other stages (embedding, router, the shared expert's gate, sampler) run whole on every
  // device. The devices must divide the kv heads and the GDN key heads; excludes kv_head_waits,
  // fused_mlp and the splits.
  uint32_t devices = 1;
  // Over several devices, the routed experts expert-parallel instead: device d holds experts
  // [d E/N, (d+1) E/N) and computes the slots routed to them whole (their gate and up rows,
  // their down dots), and every device sums the k slots' rows, exchanged, in slot order: the
  // bits of the graph with the experts' down unsplit, but each device's load follows the
  // routing. The shared expert stays tensor-parallel, its down dots split into a piece a device
  // (the bits of shared_down_split = {devices, devices}). The devices must divide the experts.
  bool expert_parallel = false;
};

// The builder's choices when BuildOptions leaves them at 0. Rows per task: a multiple of 8 (one
// row per warp of a 256-thread CUDA block), so that a projection stage of `rows` output rows (q,
// k and v together) has about `stage_tasks` tasks. GATE_UP stages too: on qwen3-0.6b, 24 rows
// a task (128 tasks, 96 KB of weights each) are 1.0% faster at position 1 than 32 (96 tasks),
// whose 128-KB copies into shared memory the stage waits for (docs/EXPERIMENTS.md;
// multiples of 16 were faster while GATE_UP read its weights from global memory).
// Chunks per kv head: about 256 positions each at the full context, at most 128 attention tasks
// in all (one wave on such a GPU).
uint32_t rows_per_task_for(uint32_t rows, uint32_t stage_tasks);
uint32_t attn_chunks_for_context(uint32_t context, uint32_t kv_heads);
// Q-head splits: when each kv head's attention is one chunk (short contexts), the most that
// divide the group and keep the attention tasks within that wave; chunks already spread a
// longer context's attention, so then 1.
uint32_t attn_q_splits_for(uint32_t chunks, uint32_t n_heads, uint32_t kv_heads);
// GDN gangs: the most members that divide the value head size into shares of at least 16 rows
// (half-warps of the CUDA tile: each takes a state row) and keep the GDN tasks within that wave.
uint32_t gdn_gang_for(uint32_t value_heads, uint32_t value_dim);

// Throws spindle::Error when the family is not one the builder supports yet, when the weights
// do not match the config, or when a size derived from the config and the options does not
// fit where it goes (a view's 32-bit rows, the LM head's 16-bit argmax slots, the task and arena
// limits): each computed in 64 bits and refused, naming the fields and options, before anything
// is allocated for it.
Graph build_decode_graph(const ModelWeights& w, const BuildOptions& opt);

}  // namespace spindle

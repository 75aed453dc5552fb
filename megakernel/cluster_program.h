// The two-hop layer's persistent kernel (cluster_kernel.cu, docs/two-hop-layer.md) runs a
// graph whose dense layers were built for it (`--tune kv-head-waits=on --tune o-proj-split=KV_HEADS
// --tune attn-chunks=8 --tune fused-mlp=PIECES/8`) as one program: each block holds a fixed role a
// layer (its kv head's front gang rank, its MLP piece), the gangs are thread-block clusters
// of 8, and the graph's tasks are read once, on the host, into this record of pointers. Its
// results are the graph's bits: every sum runs in the order the graph's tasks define.
#pragma once
#include <stdint.h>

#include <string>
#include <vector>

#include "megakernel/device_records.h"
#include "ops/bf16.h"
#include "tasks/graph.h"
#include "tasks/host_device.h"

namespace spindle::cuda {

constexpr uint32_t kClusterRanks = 8;      // blocks a cluster: a kv head's front gang, an MLP gang
constexpr uint32_t kClusterMaxGangs = 16;  // MLP gangs (clusters) whose sums a row adds at most
// A block's argmax partial: two flagged words (value, index) at the start of a 128-byte line of
// its own, 16 words apart: every block polls every partial, so no line has more than one poller
// a block.
constexpr uint32_t kArgmaxStride = 16;

// One layer's weights and cache, and the graph tasks and counters a failure names.
struct ClusterLayer {
  const bf16 *wq, *wk, *wv;  // [Hq*D, H], [Hkv*D, H], [Hkv*D, H]; rows H apart
  const bf16* wo;            // piece-major (the executor repacks it): piece g's H rows of G*D from g*H*G*D
  const bf16 *wg, *wu;       // [I, H], rows H apart
  const bf16* wd;            // piece-major (repack_down.h): piece j's H rows of P from j*H*P
  const bf16 *in_norm, *post_norm, *q_norm, *k_norm;
  bf16* kv;                  // K row g*context + t, V row (Hkv + g)*context + t, kv_stride apart
  uint32_t attention_task, o_proj_task, mlp_task;
  uint32_t o_proj_counter, mlp_counter;
};

struct ClusterProgram {
  const ClusterLayer* layers;  // device memory, n_layers of them
  SpGraphParams params;
  uint32_t kv_stride, rope_stride;
  uint32_t mlp_piece, mlp_gangs;  // P intermediate columns a member; gangs of kClusterRanks
  const bf16 *embed, *final_norm, *lm_head, *rope;
  uint32_t embed_stride;
  float* logits;
  const uint32_t* forced_tokens;
  uint32_t* out_tokens;
  SpStepState* state;
  uint32_t embed_task, lm_head_task, sample_task, sample_counter;
  // The kernel's own exchange memory (cluster_kernel.cu): the global hops' flagged words,
  // [2 (layer parity)][Hkv][H] o_proj pieces and [2][gangs][H] gang sums, and each block's
  // argmax partial ([block][kArgmaxStride]).
  unsigned long long *o_words, *mlp_words, *argmax_words;
  RunControl* control;
};

// A traced run's records (DeviceTrace): each block's phases of each layer, then its tail's, every
// step; a phase's record stands for the graph task whose work it does (cluster_trace_tasks).
enum ClusterPhase : uint32_t {
  kPhaseQkv,        // the rank's q/k/v rows, until the gang's have arrived
  kPhaseAttention,  // its chunk's attention, until the head's partials have arrived and merged
  kPhaseOProj,      // its rows of its head's o_proj piece
  kPhaseMlp,        // an MLP member, until its gang's sums are stored
  kLayerPhases,
  kPhaseLmHead = kLayerPhases,  // its LM head rows
  kPhaseSample,                 // block 0's: the step's token chosen from every block's partial
  kPhases
};
SP_HDI uint32_t cluster_trace_records(uint32_t layers, uint32_t blocks) {
  return (layers * kLayerPhases + kPhases - kLayerPhases) * blocks;
}
// Where the record of (step, layer, block, phase) lies; `layer` is ignored for the tail's phases.
SP_HDI uint32_t cluster_trace_record(uint32_t step, uint32_t layers, uint32_t layer, uint32_t block, uint32_t blocks,
                                     ClusterPhase phase) {
  const uint32_t in_step = phase < kLayerPhases
                               ? (layer * blocks + block) * kLayerPhases + phase
                               : layers * blocks * kLayerPhases + block * (kPhases - kLayerPhases) + phase - kLayerPhases;
  return step * cluster_trace_records(layers, blocks) + in_step;
}

// The LM head's rows of block `block` of `blocks`: [first, first + rows), the vocabulary cut in
// equal runs (the last shorter or empty).
struct LmRows {
  uint32_t first, rows;
};
SP_HDI LmRows cluster_lm_rows(uint32_t vocab, uint32_t block, uint32_t blocks) {
  const uint32_t each = (vocab + blocks - 1) / blocks, first = block * each < vocab ? block * each : vocab;
  return {first, (first + each < vocab ? first + each : vocab) - first};
}

// Why the graph cannot run as the cluster program, or an empty string when it can.
std::string cluster_program_problem(const Graph& g);

// The graph's layers as the host resolves them (views → device addresses at `bases`, the
// arenas' device addresses); throws spindle::Error with cluster_program_problem's reason. Every
// weight is read as the graph lays it out (rows of H elements, the LM head's too, back to
// back), except o_proj: the executor repacks each layer's [H, Hq*D] (rows o_stride apart)
// piece-major before the first launch, so that a rank's block of it is one span.
struct ClusterPlan {
  ClusterProgram program{};  // layers, exchange memory and control left for the executor
  std::vector<ClusterLayer> layers;
  uint32_t o_stride;
};
ClusterPlan plan_cluster_program(const Graph& g, const std::vector<uint8_t*>& bases);

// The graph task each record of one step stands for, on `clusters` clusters (the roles depend on
// how many), or SP_NO_TASK where no block has that phase.
constexpr uint32_t SP_NO_TASK = 0xFFFFFFFFu;
std::vector<uint32_t> cluster_trace_tasks(const Graph& g, uint32_t clusters);

}  // namespace spindle::cuda

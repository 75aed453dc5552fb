#include "megakernel/cuda_runner.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <map>

#include "megakernel/cuda_check.h"
#include "megakernel/repack_down.h"
#include "megakernel/task_smem.h"
#include "megakernel/tile_layout.h"
#include "ops/attention.h"
#include "tasks/error.h"

namespace spindle::cuda {
namespace {

// Attention scores of one block of positions stay in shared memory; a longer chunk is scored
// twice (once for its max, once for its weights) rather than held whole. 32 KB hold 2048
// positions of a group of 4 q heads (qwen3-8b's 1029-position chunks at context 16449, scored
// twice in 16 KB, ran 23% slower). The chunk's K and V rows are staged in shared memory a tile
// of positions at a time: 160 KB hold 320 positions at head_dim 128, so the builder's chunks of
// about 256 positions arrive with the q heads in one round trip (64 KB, two more round trips at
// those chunks, was 4.4% slower on qwen3-0.6b at position 4096; docs/EXPERIMENTS.md).
constexpr uint32_t kAttnScoreBytes = 32 * 1024;
constexpr uint32_t kAttnKVBytes = 160 * 1024;
// The cluster program gives the rest of a block's shared memory to its weight ring, so its
// attention stages less by default: 128 positions of K and V at head_dim 128 (qwen3-0.6b: 8
// ring slots where 32 KB left 10; 1.3% faster at position 1024 and 3.4% at 4096, 0.6% slower at
// position 1: docs/EXPERIMENTS.md), and one pass of scores for chunks of up to 2048
// positions of a group of 2 q heads. At a context of 512 or less no chunk needs more than 32 KB.
constexpr uint32_t kClusterAttnScoreBytes = 16 * 1024;
constexpr uint32_t kClusterAttnKVBytes = 64 * 1024;

uint32_t longest_chunk(const SpGraphParams& p) { return chunk_size(p.context, p.attn_chunks); }

uint32_t attn_score_positions(const SpGraphParams& p, uint32_t bytes) {
  const uint32_t group = attn_tile_heads(p);
  return std::max(1u, std::min(longest_chunk(p), bytes / (4 * group)));
}

uint32_t attn_kv_positions(const SpGraphParams& p, uint32_t bytes) {
  return std::max(1u, std::min(longest_chunk(p), bytes / (4 * std::max(1u, p.head_dim))));
}

// The largest tile of the graph's dynamic shared memory.
size_t tile_smem_bytes(const Graph& g, uint32_t score_positions, uint32_t kv_positions) {
  size_t bytes = kTileScratchBytes;
  for (const SpTask& t : g.tasks) bytes = std::max(bytes, task_smem_bytes(g, t, score_positions, kv_positions));
  return bytes;
}

}  // namespace

DeviceBuffer zeroed(size_t bytes, const std::string& what) {
  DeviceBuffer b(bytes, what);
  SP_CUDA(cudaMemset(b.data(), 0, b.bytes()));
  return b;
}

SharedDevice::SharedDevice(const Graph& g, const ModelWeights& w, bool gangs)
    : model(g, w),
      counters(zeroed((size_t(g.num_counters()) + (gangs ? g.tasks.size() : 0)) * sizeof(uint32_t), "the counters")),
      control(zeroed(sizeof(RunControl), "the run control block")) {}

void copy_to_device(DeviceBuffer& b, const void* host) {
  SP_CUDA(cudaMemcpy(b.data(), host, b.bytes(), cudaMemcpyHostToDevice));
}

void repack_down_weights(const Graph& g, const DeviceModel& model) {
  std::map<uint32_t, uint32_t> piece_of_view;
  for (const SpTask& t : g.tasks) {
    if (t.op != SP_OP_MLP) continue;
    const uint32_t piece = t.tile_end - t.tile_begin;
    const auto [at, added] = piece_of_view.emplace(t.operand[2], piece);
    if (!added && at->second != piece)
      throw Error("cuda executor: view '" + g.view_names[t.operand[2]] + "' is cut into MLP pieces of " +
                  std::to_string(at->second) + " and " + std::to_string(piece) + " columns");
  }
  for (const auto& [v, piece] : piece_of_view) {
    const SpView& W = g.views[v];
    repack_piece_major(model.arena(W.arena) + sp_view_offset(W), W.rows, W.cols, W.row_stride, piece);
  }
}

DeviceGraph device_graph(const Graph& g, const SharedDevice& d, const LaunchLimits& limits, const DeviceTables& t) {
  return DeviceGraph{d.model.context(),
                     t.tasks,
                     t.staged,
                     uint32_t(g.tasks.size()),
                     uint32_t(g.arenas.size()),
                     limits.score_positions,
                     limits.kv_positions,
                     d.counters.as<uint32_t>(),
                     t.list_begin,
                     t.list_tasks,
                     t.stage_first,
                     t.n_stages,
                     t.gang_counters,
                     d.control.as<RunControl>()};
}

std::unique_ptr<Runner> make_runner(const Graph& g, const ExecutorOptions& opt, SharedDevice& d) {
  const MegakernelTuning& tuning = opt.megakernel;
  const bool megakernel = opt.cuda_mode == CudaMode::Megakernel, cluster = megakernel && tuning.cluster_program;
  if (megakernel) repack_down_weights(g, d.model);
  LaunchLimits limits;
  limits.score_positions = attn_score_positions(
      g.params, tuning.attn_score_bytes ? tuning.attn_score_bytes : cluster ? kClusterAttnScoreBytes : kAttnScoreBytes);
  limits.kv_positions = attn_kv_positions(
      g.params, tuning.attn_kv_bytes ? tuning.attn_kv_bytes : cluster ? kClusterAttnKVBytes : kAttnKVBytes);
  limits.tile_smem = tile_smem_bytes(g, limits.score_positions, limits.kv_positions);
  int device = 0, smem_limit = 0, sms = 0;
  SP_CUDA(cudaGetDevice(&device));
  SP_CUDA(cudaDeviceGetAttribute(&smem_limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  SP_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  limits.smem_limit = size_t(smem_limit);
  limits.sms = uint32_t(sms);
  if (limits.tile_smem > limits.smem_limit)
    throw Error("cuda executor: the graph's largest tile needs " + std::to_string(limits.tile_smem) +
                " bytes of shared memory; a block may have " + std::to_string(smem_limit) +
                "; lower --tune cuda-attn-kv-kb or cuda-attn-score-kb");
  if (cluster) return make_cluster_runner(g, opt, d, limits);
  if (megakernel) return make_persistent_runner(g, opt, d, limits);
  return make_stage_runner(g, opt, d, limits);
}

}  // namespace spindle::cuda

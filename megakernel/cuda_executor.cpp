#include "megakernel/cuda_executor.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "host/schedule.h"
#include "megakernel/cluster_kernel.h"
#include "megakernel/cluster_program.h"
#include "megakernel/cuda_check.h"
#include "megakernel/cuda_handles.h"
#include "megakernel/device_buffer.h"
#include "megakernel/device_model.h"
#include "megakernel/failure_message.h"
#include "megakernel/l2_prefetch.h"
#include "megakernel/megakernel.h"
#include "megakernel/per_op.h"
#include "megakernel/repack_down.h"
#include "megakernel/task_copies.h"
#include "megakernel/task_smem.h"
#include "megakernel/tile_layout.h"
#include "ops/attention.h"
#include "tasks/counters.h"
#include "tasks/gang.h"
#include "tasks/gemv_piece.h"
#include "tasks/gemv_split.h"
#include "tasks/mlp_shape.h"
#include "tasks/op_decls.h"
#include "tasks/error.h"

namespace spindle {

using cuda::DeviceBuffer;

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
// Fewer slots than this leave too little in flight for the cluster program to stream its weights.
constexpr uint32_t kClusterMinRingSlots = 4;

uint32_t longest_chunk(const SpGraphParams& p) { return chunk_size(p.context, p.attn_chunks); }

uint32_t attn_score_positions(const SpGraphParams& p, uint32_t bytes) {
  const uint32_t group = attn_tile_heads(p);
  return std::max(1u, std::min(longest_chunk(p), bytes / (4 * group)));
}

uint32_t attn_kv_positions(const SpGraphParams& p, uint32_t bytes) {
  return std::max(1u, std::min(longest_chunk(p), bytes / (4 * std::max(1u, p.head_dim))));
}

// The cluster program's score block: a multiple of 16 positions, so that the K/V rows staged
// after it start on a 128-byte boundary (at position 4096, 521 positions
// took 2.8% longer a token than 520; with every buffer on a 128-byte boundary, 528 another 0.6%
// less).
uint32_t cluster_score_positions(uint32_t positions) { return (positions + 15u) & ~15u; }

[[noreturn]] void unsupported(uint32_t task, const SpTask& t, const std::string& what) {
  const char* name = sp_opcode_name(t.op);
  throw Error("cuda executor: task " + std::to_string(task) + " (" + (name ? name : "unknown opcode") + "): " + what);
}

// What the device tiles cannot do is refused here, before anything runs.
void check_supported(const Graph& g) {
  const SpGraphParams& p = g.params;
  if (p.n_kv_heads == 0 || p.n_heads % p.n_kv_heads)
    throw Error("cuda executor: " + std::to_string(p.n_heads) + " q heads do not split over " +
                std::to_string(p.n_kv_heads) + " kv heads");
  if (p.attn_q_splits == 0 || p.n_heads / p.n_kv_heads % p.attn_q_splits)
    throw Error("cuda executor: attention q-head splits " + std::to_string(p.attn_q_splits) + " do not divide " +
                std::to_string(p.n_heads / p.n_kv_heads) + " q heads a kv head");
  const uint32_t group = attn_tile_heads(p);
  if (group > cuda::kAttnMaxGroup || group * p.head_dim > cuda::kAttnPairsPerThread * cuda::kBlockThreads)
    throw Error("cuda executor: attention tiles of " + std::to_string(group) + " q heads of dim " +
                std::to_string(p.head_dim) + " are more than the attention tile holds (raise --tune attn-q-splits)");
  for (uint32_t i = 0; i < g.tasks.size(); ++i) {
    const SpTask& t = g.tasks[i];
    if (!(sp_op_executors(t.op) & (SP_ON_CUDA_PLAIN | SP_ON_CUDA_TWO_HOP | SP_ON_CUDA_PER_OP)))
      unsupported(i, t, "opcode " + std::to_string(t.op) + " has no device tile");
    if (t.op == SP_OP_GEMV) {
      const uint32_t dtype = g.views[t.operand[3]].dtype;
      if (dtype != SP_BF16 && dtype != SP_F32) unsupported(i, t, "the output is neither bf16 nor f32");
      if ((t.operand[5] & 1u) && t.operand[6] == SP_NO_VIEW)
        unsupported(i, t, "the argmax flag is set but no partials view");
      if (const char* problem = gemv_split_problem(t.operand[7], g.views[t.operand[0]].cols)) unsupported(i, t, problem);
    }
    if (t.op == SP_OP_MLP)
      if (const char* problem = mlp_problem(t, g.views.data())) unsupported(i, t, problem);
    if (t.op == SP_OP_GEMV_PIECE)
      if (const char* problem = gemv_piece_problem(t, g.views.data())) unsupported(i, t, problem);
    if (t.op == SP_OP_SAMPLE && t.operand[2] == 0) unsupported(i, t, "no argmax partials");
    if (t.op == SP_OP_GDN) {
      const uint32_t dk = g.views[t.operand[6]].cols, dv = g.views[t.operand[4]].cols;
      if (dk > cuda::kGdnMaxHeadDim || dv > cuda::kGdnMaxHeadDim)
        unsupported(i, t, "key and value heads of " + std::to_string(dk) + " and " + std::to_string(dv) +
                              " elements; the tile takes at most " + std::to_string(cuda::kGdnMaxHeadDim));
    }
  }
}


// Whether the graph needs the persistent kernel's two-hop build (megakernel.h): split GEMV dots,
// GEMV pieces or MLP gangs.
bool needs_two_hop(const Graph& g) {
  return std::any_of(g.tasks.begin(), g.tasks.end(), [](const SpTask& t) {
    return !(sp_op_executors(t.op) & SP_ON_CUDA_PLAIN) || (t.op == SP_OP_GEMV && gemv_split(t.operand[7]).pieces > 1);
  });
}

// The most tasks a stage holding a gang has (0: no gangs). Its gangs' members can run at once
// when every one of them gets a block of its own: `blocks` at least that many.
uint32_t largest_gang_stage(const std::vector<cuda::Stage>& stages, const Graph& g) {
  uint32_t most = 0;
  for (const cuda::Stage& st : stages)
    for (uint32_t i = st.first_task; i < st.first_task + st.tasks; ++i)
      if (sp_gang_width(g.tasks[i]) > 1) most = std::max(most, st.tasks);
  return most;
}

// ... and for the largest tile of the graph.
size_t tile_smem_bytes(const Graph& g, uint32_t score_positions, uint32_t kv_positions) {
  size_t bytes = cuda::kTileScratchBytes;
  for (const SpTask& t : g.tasks) bytes = std::max(bytes, cuda::task_smem_bytes(g, t, score_positions, kv_positions));
  return bytes;
}

// What the tasks' weight copies (task_copies.h) ask of a launch: the dynamic shared memory they
// need (0: no task has one), and whether some copy may start during the task before.
struct CopiesNeed {
  size_t smem = 0;
  bool ahead = false;
};
CopiesNeed copies_need(const Graph& g, const cuda::CopyLimits& limits) {
  CopiesNeed need;
  for (const SpTask& t : g.tasks) {
    const cuda::TaskCopy c = cuda::task_copy(g, t, limits);
    if (c.bytes) need.smem = std::max<size_t>(need.smem, c.at + c.bytes);
    need.ahead = need.ahead || c.ahead;
  }
  return need;
}

// The L2 prefetch budget a stage, kL2PrefetchAuto resolved for g's model.
uint64_t l2_prefetch_bytes(const Graph& g, const MegakernelTuning& tuning) {
  return tuning.l2_prefetch_bytes == kL2PrefetchAuto ? l2_prefetch_auto_bytes(g.params.hidden)
                                                     : tuning.l2_prefetch_bytes;
}

// Each task's record with its view operands resolved (cuda::StagedTask); slots that hold no
// view keep their word and a zeroed view.
std::vector<cuda::StagedTask> staged_tasks(const Graph& g, const std::vector<cuda::Stage>& stages,
                                          const MegakernelTuning& tuning, const cuda::CopyLimits& copies,
                                          uint32_t score_positions, uint32_t kv_positions) {
  const std::vector<cuda::L2Prefetch> prefetch =
      cuda::plan_l2_prefetch(g, stages, tuning.l2_prefetch_distance, l2_prefetch_bytes(g, tuning));
  std::vector<cuda::StagedTask> staged(g.tasks.size());
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    cuda::StagedTask& s = staged[i];
    s.t = g.tasks[i];
    s.prefetch = prefetch[i];
    s.copy = cuda::task_copy(g, g.tasks[i], copies);
    s.tile_smem = uint32_t(cuda::task_smem_bytes(g, g.tasks[i], score_positions, kv_positions));
    for_each_view_operand(g.tasks[i], [&](uint32_t k, uint32_t v) {
      s.views[k] = g.views[v];
      s.t.operand[k] = k;
    });
    const OpcodeOperands ops = opcode_operands(s.t.op);
    for (uint32_t k = 0; k < SP_TASK_OPERANDS; ++k)
      if (ops.operand[k].kind == OperandKind::Params) {  // one at most (tests/tasks_op_decls.cpp)
        s.params = g.op_params[s.t.operand[k]];
        s.t.operand[k] = 0;
      }
    if (s.t.op == SP_OP_MLP) s.views[2].row_stride = cuda::kPieceMajorStride;  // repack_down_weights
  }
  return staged;
}

// The persistent kernel reads an MLP graph's down weights piece-major (repack_down.h): each
// down view of an MLP task, rewritten in place once. Throws if two tasks cut one view into
// pieces of different widths.
void repack_down_weights(const Graph& g, const cuda::DeviceModel& model) {
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
    cuda::repack_piece_major(model.arena(W.arena) + sp_view_offset(W), W.rows, W.cols, W.row_stride, piece);
  }
}

template <class T>
DeviceBuffer upload(const std::vector<T>& host, const std::string& what) {
  DeviceBuffer b(host.size() * sizeof(T), what);
  SP_CUDA(cudaMemcpy(b.data(), host.data(), b.bytes(), cudaMemcpyHostToDevice));
  return b;
}

}  // namespace

struct CudaExecutor::Device {
  cuda::DeviceModel model;
  DeviceBuffer tasks, staged, counters, control, list_begin, list_tasks, stage_first, stage_claims, trace;
  DeviceBuffer progress;
  // The cluster program's (cluster_program.h): its layers and exchange words.
  DeviceBuffer cluster_layers, o_words, mlp_words, argmax_words;
  cuda::ClusterProgram program{};
  uint32_t cluster_flag = 0;  // the exchange words' flags used so far
  std::vector<cuda::Stage> stages;  // the per-op launches; the megakernel's stage table and L2 prefetch plan
  cuda::DeviceGraph graph{};
  size_t smem = 0;
  cuda::Stream stream = cuda::make_stream();
  cuda::Event start = cuda::make_event(), stop = cuda::make_event();
  cuda::GraphExec step_graph;

  Device(const Graph& g, const ModelWeights& w) : model(g, w) {}

  // One step of per-op launches, captured once and replayed per step.
  void capture_step_graph() {
    SP_CUDA(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal));
    cudaGraph_t raw = nullptr;
    try {
      cuda::launch_step_per_op(graph, stages, stream.get());
    } catch (...) {
      cudaStreamEndCapture(stream.get(), &raw);  // ends the capture; the error thrown is the cause
      cuda::CapturedGraph discard(raw);
      throw;
    }
    SP_CUDA(cudaStreamEndCapture(stream.get(), &raw));
    const cuda::CapturedGraph captured(raw);
    cudaGraphExec_t exec = nullptr;
    SP_CUDA(cudaGraphInstantiate(&exec, captured.get(), 0));
    step_graph = cuda::GraphExec(exec);
  }
};

CudaExecutor::CudaExecutor(const Graph& g, const ModelWeights& w, const ExecutorOptions& opt)
    : Executor(g), opt_(opt) {
  const MegakernelTuning& tuning = opt.megakernel;
  check_supported(g);
  dev_ = std::make_unique<Device>(g, w);
  Device& d = *dev_;
  d.stages = cuda::graph_stages(g);
  if (opt.cuda_mode == CudaMode::Megakernel) repack_down_weights(g, d.model);
  else d.tasks = upload(g.tasks, "the task table");
  two_hop_ = needs_two_hop(g);
  gang_stage_ = largest_gang_stage(d.stages, g);
  // The graph's counters, then, for a graph with gangs, one gang barrier word a task (used at
  // gangs' rank-0 records).
  d.counters = DeviceBuffer((size_t(g.num_counters()) + (gang_stage_ ? g.tasks.size() : 0)) * sizeof(uint32_t),
                            "the counters");
  SP_CUDA(cudaMemset(d.counters.data(), 0, d.counters.bytes()));
  d.control = DeviceBuffer(sizeof(cuda::RunControl), "the run control block");
  SP_CUDA(cudaMemset(d.control.data(), 0, d.control.bytes()));

  const bool cluster = opt.cuda_mode == CudaMode::Megakernel && tuning.cluster_program;
  const uint32_t score_positions = attn_score_positions(
      g.params, tuning.attn_score_bytes ? tuning.attn_score_bytes : cluster ? kClusterAttnScoreBytes : kAttnScoreBytes);
  const uint32_t kv_positions = attn_kv_positions(
      g.params, tuning.attn_kv_bytes ? tuning.attn_kv_bytes : cluster ? kClusterAttnKVBytes : kAttnKVBytes);
  d.smem = tile_smem_bytes(g, score_positions, kv_positions);
  int device = 0, smem_limit = 0, sms = 0;
  SP_CUDA(cudaGetDevice(&device));
  SP_CUDA(cudaDeviceGetAttribute(&smem_limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  SP_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  if (d.smem > size_t(smem_limit))
    throw Error("cuda executor: the graph's largest tile needs " + std::to_string(d.smem) +
                " bytes of shared memory; a block may have " + std::to_string(smem_limit) +
                "; lower --tune cuda-attn-kv-kb or cuda-attn-score-kb");

  uint32_t n_stages = 0;  // the ticket schedule's
  if (cluster) {
    prepare_cluster_program(g, score_positions, kv_positions, size_t(smem_limit));
  } else if (opt.cuda_mode == CudaMode::Megakernel) {
    if (tuning.blocks_per_sm != 1 && tuning.blocks_per_sm != 2)
      throw Error("cuda executor: blocks_per_sm is 1 or 2, not " + std::to_string(tuning.blocks_per_sm));
    if (two_hop_ && tuning.blocks_per_sm != 1)
      throw Error("cuda executor: the megakernel's build for split GEMVs and MLP gangs runs 1 block an SM, not " +
                  std::to_string(tuning.blocks_per_sm));
    const size_t static_smem = cuda::megakernel_static_smem(tuning.blocks_per_sm, two_hop_);
    const size_t dynamic_limit = size_t(smem_limit) - static_smem;
    if (d.smem > dynamic_limit)
      throw Error("cuda executor: the graph's largest tile needs " + std::to_string(d.smem) +
                  " bytes of shared memory beside the persistent kernel's " + std::to_string(static_smem) +
                  "; a block may have " + std::to_string(smem_limit) +
                  " in all; lower --tune cuda-attn-kv-kb or cuda-attn-score-kb");
    // Sized for every copy an MLP member may get; whether it gets one (only when it runs at once
    // with its gang) is known once the grid is.
    const cuda::CopyLimits copies{tuning.weight_preload_bytes, dynamic_limit, true, tuning.copy_ahead_bytes};
    const CopiesNeed need = copies_need(g, copies);
    preload_smem_ = need.smem;
    // Copies ahead (the two-hop build's) are placed where the task before leaves room: most
    // often at the top.
    copy_ahead_ = two_hop_ && need.ahead;
    mk_smem_ = copy_ahead_ ? dynamic_limit : std::max(d.smem, preload_smem_);
    const uint32_t per_sm = cuda::megakernel_blocks_per_sm(tuning.blocks_per_sm, two_hop_, mk_smem_);
    if (per_sm == 0) throw Error("cuda executor: the persistent kernel does not fit on an SM");
    if (per_sm < tuning.blocks_per_sm)
      throw Error("cuda executor: " + std::to_string(tuning.blocks_per_sm) + " blocks do not fit on an SM with " +
                  std::to_string(mk_smem_) + " bytes of shared memory each (the largest tile's and the weight "
                  "preload's); lower --tune cuda-attn-kv-kb, cuda-attn-score-kb or cuda-preload-kb");
    const uint32_t resident = per_sm * uint32_t(sms);
    blocks_ = std::min(opt.workers ? opt.workers : tuning.blocks_per_sm * uint32_t(sms), resident);
    gangs_at_once_ = gang_stage_ > 0 && blocks_ >= gang_stage_;
    const std::vector<cuda::StagedTask> staged = staged_tasks(
        g, d.stages, tuning, {copies.projection_bytes, dynamic_limit, gangs_at_once_, copies.ahead_bytes},
        score_positions, kv_positions);
    d.staged = upload(staged, "the staged task table");
    d.progress = DeviceBuffer(size_t(blocks_) * 4 * sizeof(uint32_t), "the blocks' progress");
    SP_CUDA(cudaMemset(d.progress.data(), 0, d.progress.bytes()));
    if (opt.schedule == ScheduleKind::Static) {
      std::vector<uint32_t> begin{0}, tasks;
      for (const std::vector<uint32_t>& list : static_lists(g, blocks_)) {
        for (size_t i = 0; i < list.size(); ++i) {
          const SpTask& t = g.tasks[list[i]];
          const bool same = i + 1 < list.size() && g.tasks[list[i + 1]].signal_counter == t.signal_counter &&
                            g.tasks[list[i + 1]].wait_counter != t.signal_counter;
          tasks.push_back(list[i] | (same ? cuda::kListSameSignal : 0u));
        }
        begin.push_back(uint32_t(tasks.size()));
      }
      d.list_begin = upload(begin, "the static schedule");
      d.list_tasks = upload(tasks, "the static schedule");
    } else {
      std::vector<uint32_t> first;
      for (const cuda::Stage& st : cuda::op_runs(g, d.stages)) first.push_back(st.first_task);
      n_stages = uint32_t(first.size());
      first.push_back(uint32_t(g.tasks.size()));
      d.stage_first = upload(first, "the stage table");
    }
  } else {
    cuda::prepare_stage_kernel(d.smem);
    for (cuda::Stage& st : d.stages)  // each launch asks for what its own tiles need
      for (uint32_t i = st.first_task; i < st.first_task + st.tasks; ++i)
        st.smem = std::max(st.smem, cuda::task_smem_bytes(g, g.tasks[i], score_positions, kv_positions));
  }

  d.graph = cuda::DeviceGraph{d.model.context(),
                              d.tasks.as<const SpTask>(),
                              d.staged.as<const cuda::StagedTask>(),
                              uint32_t(g.tasks.size()),
                              uint32_t(g.arenas.size()),
                              score_positions,
                              kv_positions,
                              d.counters.as<uint32_t>(),
                              d.list_begin.as<const uint32_t>(),
                              d.list_tasks.as<const uint32_t>(),
                              d.stage_first.as<const uint32_t>(),
                              n_stages,
                              gangs_at_once_ ? d.counters.as<uint32_t>() + g.num_counters() : nullptr,
                              d.control.as<cuda::RunControl>()};
  if (opt.cuda_mode == CudaMode::Graph) d.capture_step_graph();
  logits_.resize(g.views[g.io.logits].cols);
  // The counters', control block's and progress' cudaMemsets above run on the legacy default
  // stream, which the executor's non-blocking stream does not wait for: without this, a
  // first run could start on memory still holding an earlier owner's bytes and see the
  // zeros land mid-run (waits that never end, or tasks that run before their inputs).
  SP_CUDA(cudaDeviceSynchronize());
}

// The cluster program (cluster_program.h): its plan on this device's arenas, its exchange
// memory, and as many clusters as are co-resident (one a kv head, one an MLP gang at least).
void CudaExecutor::prepare_cluster_program(const Graph& g, uint32_t score_positions, uint32_t kv_positions,
                                           size_t smem_limit) {
  Device& d = *dev_;
  const SpGraphParams& p = g.params;
  std::vector<uint8_t*> bases;
  for (uint32_t a = 0; a < g.arenas.size(); ++a) bases.push_back(d.model.arena(a));
  cuda::ClusterPlan plan = cuda::plan_cluster_program(g, bases);
  const cuda::ClusterSmem smem =
      cuda::cluster_kernel_smem(p, cluster_score_positions(score_positions), kv_positions, smem_limit);
  if (smem.ring_slots < kClusterMinRingSlots)
    throw Error("cuda executor: the cluster program's weight ring needs " + std::to_string(kClusterMinRingSlots) +
                " slots of " + std::to_string(cuda::kRingChunkBytes >> 10) + " KiB; " +
                std::to_string(smem.ring_slots) + " fit beside attention's shared memory in a block's " +
                std::to_string(smem_limit) + " bytes; lower --tune cuda-attn-kv-kb or cuda-attn-score-kb");
  cluster_smem_ = smem.bytes;
  ring_slots_ = smem.ring_slots;
  mlp_ring_slots_ = smem.mlp_ring_slots;
  const uint32_t needed = std::max(p.n_kv_heads, plan.program.mlp_gangs);  // a kv head, an MLP gang a cluster
  const uint32_t clusters = cuda::cluster_kernel_max_clusters(cluster_smem_);
  const uint32_t wanted = opt_.workers ? opt_.workers / cuda::kClusterRanks : clusters;
  if (std::min(wanted, clusters) < needed)
    throw Error("cuda executor: the cluster program needs " + std::to_string(needed) + " clusters of " +
                std::to_string(cuda::kClusterRanks) + " blocks (one a kv head, one an MLP gang); " +
                std::to_string(std::min(wanted, clusters)) + " " +
                (wanted < clusters ? "asked for (--workers / 8)" : "fit on this device"));
  clusters_ = std::min(wanted, clusters);
  blocks_ = clusters_ * cuda::kClusterRanks;
  const size_t H = p.hidden;
  // o_proj piece-major, as the program streams it (cluster_program.h); nothing else reads it.
  for (const cuda::ClusterLayer& layer : plan.layers)
    cuda::repack_piece_major(const_cast<bf16*>(layer.wo), uint32_t(H), p.n_heads * p.head_dim, plan.o_stride,
                             p.n_heads / p.n_kv_heads * p.head_dim);
  d.cluster_layers = upload(plan.layers, "the cluster program's layers");
  d.o_words = DeviceBuffer(2 * p.n_kv_heads * H * 8, "the cluster program's o_proj words");
  d.mlp_words = DeviceBuffer(2 * plan.program.mlp_gangs * H * 8, "the cluster program's MLP words");
  d.argmax_words = DeviceBuffer(size_t(blocks_) * cuda::kArgmaxStride * 8, "the cluster program's argmax partials");
  for (DeviceBuffer* b : {&d.o_words, &d.mlp_words, &d.argmax_words})
    SP_CUDA(cudaMemset(b->data(), 0, b->bytes()));  // flag 0: no layer's
  d.program = plan.program;
  d.program.layers = d.cluster_layers.as<const cuda::ClusterLayer>();
  d.program.o_words = d.o_words.as<unsigned long long>();
  d.program.mlp_words = d.mlp_words.as<unsigned long long>();
  d.program.argmax_words = d.argmax_words.as<unsigned long long>();
  d.program.control = d.control.as<cuda::RunControl>();
  cluster_trace_tasks_ = cuda::cluster_trace_tasks(g, clusters_);
}

// The run's launches of the cluster program, `steps_per_launch` steps each; the exchange words' flags go on
// from launch to launch (zeroed again before they would wrap).
void CudaExecutor::launch_cluster_program(uint32_t steps, uint32_t score_positions, uint32_t kv_positions) {
  Device& d = *dev_;
  const uint32_t L = graph_.params.n_layers;
  const uint32_t per_launch = opt_.steps_per_launch ? opt_.steps_per_launch : steps;
  for (uint32_t done = 0; done < steps; done += per_launch) {
    cuda::ClusterLaunch launch{};
    launch.steps = std::min(per_launch, steps - done);
    if (uint64_t(d.cluster_flag) + uint64_t(launch.steps) * L + 1 > UINT32_MAX) {
      for (DeviceBuffer* b : {&d.o_words, &d.mlp_words, &d.argmax_words})
        SP_CUDA(cudaMemsetAsync(b->data(), 0, b->bytes(), d.stream.get()));
      d.cluster_flag = 0;
    }
    launch.first_step = steps_done_ + done;
    launch.first_position = state().position + done;
    launch.flag_base = d.cluster_flag;
    launch.clusters = clusters_;
    launch.watchdog_ns = uint64_t(opt_.watchdog_ms) * 1000000u;
    // Attention's area sized for the launch's longest chunk, not the graph's: where the launch's
    // positions are short, the front blocks' rings take the rest (qwen3-0.6b: 11 slots where 8,
    // -2.6% a token at position 1). Its bytes never exceed the graph's.
    const uint32_t longest = chunk_size(launch.first_position + launch.steps, graph_.params.attn_chunks);
    launch.score_positions = cluster_score_positions(std::min(score_positions, longest));
    launch.kv_positions = std::min(kv_positions, longest);
    const cuda::ClusterSmem ring =
        cuda::cluster_ring_slots(graph_.params, launch.score_positions, launch.kv_positions, cluster_smem_);
    launch.ring_slots = ring.ring_slots;
    launch.mlp_ring_slots = ring.mlp_ring_slots;
    cuda::launch_cluster_kernel(d.program, launch, cluster_smem_, d.stream.get());
    d.cluster_flag += launch.steps * L;
  }
}

CudaExecutor::~CudaExecutor() = default;

std::string CudaExecutor::describe() const {
  cudaDeviceProp prop{};
  int device = 0;
  const bool named = cudaGetDevice(&device) == cudaSuccess && cudaGetDeviceProperties(&prop, device) == cudaSuccess;
  const std::string on = named ? std::string(" on ") + prop.name : "";
  if (opt_.cuda_mode != CudaMode::Megakernel)
    return std::string("cuda ") + cuda_mode_name(opt_.cuda_mode) + " (" + std::to_string(dev_->stages.size()) +
           " launches per step)" + on;
  if (opt_.megakernel.cluster_program) {
    // The front blocks' rings at the graph's context, and in a launch whose positions are all short.
    const uint32_t short_slots =
        cuda::cluster_ring_slots(graph_.params, cluster_score_positions(1), 1, cluster_smem_).ring_slots;
    const std::string slots =
        std::to_string(ring_slots_) + (short_slots > ring_slots_ ? "-" + std::to_string(short_slots) : "");
    return "cuda megakernel, cluster program (" + std::to_string(clusters_) + " clusters of " +
           std::to_string(cuda::kClusterRanks) + " blocks x 256 threads, weight ring of " + slots + " x " +
           std::to_string(cuda::kRingChunkBytes >> 10) + " KiB, an MLP-only block's " +
           std::to_string(mlp_ring_slots_) + ")" + on;
  }
  const MegakernelTuning& t = opt_.megakernel;
  std::string knobs;
  if (t.blocks_per_sm != 1) knobs += ", " + std::to_string(t.blocks_per_sm) + " blocks/SM";
  if (!t.input_cache) knobs += ", no input cache";
  if (!t.merge_release) knobs += ", release per task";
  const MegakernelTuning defaults;
  if (t.first_sleep_ns != defaults.first_sleep_ns || t.max_sleep_ns != defaults.max_sleep_ns)
    knobs += ", sleep " + std::to_string(t.first_sleep_ns) + "-" + std::to_string(t.max_sleep_ns) + " ns";
  if (!t.weight_preload_bytes) knobs += ", no weight preload";
  else if (!preload_smem_) knobs += ", no task's weights within the " + std::to_string(t.weight_preload_bytes) + "-byte preload";
  else knobs += ", weights preloaded up to " + std::to_string(t.weight_preload_bytes) + " bytes" +
                 (copy_ahead_ ? ", copied ahead from " + std::to_string(t.copy_ahead_bytes) + " bytes" : "");
  const uint64_t prefetch = l2_prefetch_bytes(graph_, t);
  if (t.l2_prefetch_distance && prefetch)
    knobs += ", L2 prefetch " + (prefetch % (1u << 20) ? std::to_string(prefetch >> 10) + " KiB"
                                                        : std::to_string(prefetch >> 20) + " MiB") +
             " a stage at distance " + std::to_string(t.l2_prefetch_distance);
  if (two_hop_) knobs += ", two-hop build";
  if (gang_stage_)
    knobs += gangs_at_once_ ? ", gangs' members at once" : ", gangs whole (fewer blocks than a gang stage's tasks)";
  return "cuda megakernel (" + std::to_string(blocks_) + " blocks x " + std::to_string(cuda::kBlockThreads) +
         " threads, " + schedule_kind_name(opt_.schedule) + knobs + ")" + on;
}

std::span<const float> CudaExecutor::logits() const { return logits_; }

void CudaExecutor::clear_recurrent_state() {
  SP_CUDA(cudaMemset(dev_->model.arena(SP_ARENA_RECURRENT), 0, graph_.arenas[SP_ARENA_RECURRENT].bytes));
}

void CudaExecutor::run_steps(uint32_t steps) {
  if (broken_) throw Error("cuda executor: it stopped on an earlier device failure; make a new one");
  if (state().temperature > 0.0f)
    throw Error("cuda executor: only greedy sampling (temperature 0) is implemented");
  if (steps == 0) return;
  run_on_device(steps);
  read_back(steps);
  steps_done_ += steps;
}

void CudaExecutor::run_on_device(uint32_t steps) {
  Device& d = *dev_;
  const uint64_t trace_bytes = trace_records(steps) * sizeof(cuda::DeviceTrace);
  if (tracing_ && d.trace.bytes() < trace_bytes) d.trace = DeviceBuffer(trace_bytes, "the trace");
  // The cluster program writes only the records of the phases its blocks have.
  if (tracing_ && clusters_) SP_CUDA(cudaMemsetAsync(d.trace.data(), 0, trace_bytes, d.stream.get()));
  cuda::RunControl control{};
  control.step_base = steps_done_;
  control.state_step_base = state().step;
  control.trace = tracing_ ? d.trace.as<cuda::DeviceTrace>() : nullptr;
  control.progress = d.progress.as<uint32_t>();
  SP_CUDA(cudaMemcpyAsync(d.control.data(), &control, sizeof control, cudaMemcpyHostToDevice, d.stream.get()));
  SP_CUDA(cudaMemcpyAsync(d.model.arena(SP_ARENA_STATE), state_arena_.data(), state_arena_.size(),
                          cudaMemcpyHostToDevice, d.stream.get()));

  SP_CUDA(cudaEventRecord(d.start.get(), d.stream.get()));
  if (opt_.cuda_mode == CudaMode::Megakernel && opt_.megakernel.cluster_program) {
    launch_cluster_program(steps, d.graph.attn_positions, d.graph.attn_kv_positions);
  } else if (opt_.cuda_mode == CudaMode::Megakernel) {
    const uint32_t per_launch = opt_.steps_per_launch ? opt_.steps_per_launch : steps;
    const size_t claims_bytes = size_t(std::min(per_launch, steps)) * d.graph.n_stages * sizeof(uint32_t);
    if (d.stage_claims.bytes() < claims_bytes) d.stage_claims = DeviceBuffer(claims_bytes, "the stage claims");
    for (uint32_t done = 0; done < steps; done += per_launch) {
      cuda::MegakernelLaunch launch{};
      launch.first_step = steps_done_ + done;
      launch.first_position = state().position + done;
      launch.steps = std::min(per_launch, steps - done);
      launch.stage_claims = d.stage_claims.as<uint32_t>();
      if (launch.stage_claims)
        SP_CUDA(cudaMemsetAsync(launch.stage_claims, 0, size_t(launch.steps) * d.graph.n_stages * sizeof(uint32_t),
                                d.stream.get()));
      launch.backoff.watchdog_ns = uint64_t(opt_.watchdog_ms) * 1000000u;
      launch.input_cache = opt_.megakernel.input_cache;
      launch.merge_release = opt_.megakernel.merge_release;
      launch.backoff.first_sleep_ns = opt_.megakernel.first_sleep_ns;
      launch.backoff.max_sleep_ns = std::max(opt_.megakernel.first_sleep_ns, opt_.megakernel.max_sleep_ns);
      launch.preload_bytes = opt_.megakernel.weight_preload_bytes;
      launch.copy_ahead = copy_ahead_;
      launch.smem_bytes = uint32_t(mk_smem_);
      cuda::launch_megakernel(d.graph, opt_.megakernel.blocks_per_sm, two_hop_, blocks_, mk_smem_, launch,
                              d.stream.get());
    }
  } else {
    for (uint32_t s = 0; s < steps; ++s) {
      if (opt_.cuda_mode == CudaMode::Graph) SP_CUDA(cudaGraphLaunch(d.step_graph.get(), d.stream.get()));
      else cuda::launch_step_per_op(d.graph, d.stages, d.stream.get());
    }
  }
  SP_CUDA(cudaEventRecord(d.stop.get(), d.stream.get()));
  SP_CUDA(cudaStreamSynchronize(d.stream.get()));
  float ms = 0;
  SP_CUDA(cudaEventElapsedTime(&ms, d.start.get(), d.stop.get()));
  last_run_ms_ = ms;
}

void CudaExecutor::read_back(uint32_t steps) {
  Device& d = *dev_;
  cuda::RunControl control{};
  SP_CUDA(cudaMemcpy(&control, d.control.data(), sizeof control, cudaMemcpyDeviceToHost));
  if (control.failure.kind != cuda::kFailNone) {
    broken_ = true;  // the counters no longer match any whole number of steps
    throw Error(cuda::failure_message(control.failure, graph_, opt_.watchdog_ms) + blocks_report());
  }
  SP_CUDA(cudaMemcpy(state_arena_.data(), d.model.arena(SP_ARENA_STATE), state_arena_.size(), cudaMemcpyDeviceToHost));
  const SpView& lv = graph_.views[graph_.io.logits];
  SP_CUDA(cudaMemcpy(logits_.data(), d.model.arena(lv.arena) + sp_view_offset(lv), logits_.size() * sizeof(float),
                     cudaMemcpyDeviceToHost));
  if (!tracing_) return;
  std::vector<cuda::DeviceTrace> records(trace_records(steps));
  SP_CUDA(cudaMemcpy(records.data(), d.trace.data(), records.size() * sizeof(cuda::DeviceTrace), cudaMemcpyDeviceToHost));
  if (clusters_) {  // a phase's record stands for its graph task; the records no block wrote are zeros
    const size_t per_step = cluster_trace_tasks_.size();
    for (size_t i = 0; i < records.size(); ++i) records[i].task = cluster_trace_tasks_[i % per_step];
    std::erase_if(records, [](const cuda::DeviceTrace& r) { return r.end_ns == 0 || r.task == cuda::SP_NO_TASK; });
  }
  if (trace_epoch_ns_ == 0 && !records.empty())
    trace_epoch_ns_ = std::min_element(records.begin(), records.end(), [](const auto& a, const auto& b) {
                        return a.start_ns < b.start_ns;
                      })->start_ns;
  for (const cuda::DeviceTrace& r : records)
    trace_.push_back({r.step, r.task, r.worker, r.start_ns - trace_epoch_ns_, r.end_ns - trace_epoch_ns_, r.wait_ns});
}

// A run's trace records: one a task a step, or the cluster program's (cluster_program.h).
size_t CudaExecutor::trace_records(uint32_t steps) const {
  return size_t(steps) * (clusters_ ? cluster_trace_tasks_.size() : graph_.tasks.size());
}

// After a failure of the persistent kernel: where its blocks were (the earliest tasks they
// waited on or ran, with their counters), so that a stall can be traced to its cause.
std::string CudaExecutor::blocks_report() const {
  const Device& d = *dev_;
  if (opt_.cuda_mode != CudaMode::Megakernel || !d.progress.data()) return "";
  std::vector<uint32_t> progress(size_t(blocks_) * 4), counters(graph_.num_counters());
  if (cudaMemcpy(progress.data(), d.progress.data(), progress.size() * 4, cudaMemcpyDeviceToHost) != cudaSuccess ||
      cudaMemcpy(counters.data(), d.counters.data(), counters.size() * 4, cudaMemcpyDeviceToHost) != cudaSuccess)
    return "";
  uint32_t phases[5] = {};
  std::vector<uint32_t> order;
  for (uint32_t b = 0; b < blocks_; ++b) {
    ++phases[std::min<uint32_t>(progress[4 * b + 2], 4)];
    if (progress[4 * b + 2] != 0) order.push_back(b);
  }
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return std::pair(progress[4 * a + 1], progress[4 * a]) < std::pair(progress[4 * b + 1], progress[4 * b]);
  });
  std::string out = "; blocks: " + std::to_string(phases[1]) + " waiting, " + std::to_string(phases[2]) +
                    " running, " + std::to_string(phases[3]) + " past a task, " + std::to_string(phases[0]) +
                    " not started; earliest:";
  for (size_t i = 0; i < order.size() && i < 6; ++i) {
    const uint32_t b = order[i], task = progress[4 * b], step = progress[4 * b + 1], phase = progress[4 * b + 2];
    if (task >= graph_.tasks.size()) continue;
    const SpTask& t = graph_.tasks[task];
    const char* op = sp_opcode_name(t.op);
    out += " [block " + std::to_string(b) + " " + (phase == 1 ? "waits for" : phase == 2 ? "runs" : "ran") + " task " +
           std::to_string(task) + " (" + (op ? op : "?") + ") step " + std::to_string(step);
    if (t.wait_counter < counters.size())
      out += ", " + graph_.counter_names[t.wait_counter] + " = " + std::to_string(counters[t.wait_counter]) + "/" +
             std::to_string(sp_wait_target(t, step));
    if (t.signal_counter < counters.size())
      out += ", signals " + graph_.counter_names[t.signal_counter] + " = " + std::to_string(counters[t.signal_counter]);
    out += "]";
  }
  return out;
}

bool cuda_device_available(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaSuccess && count > 0) return true;
  if (why) *why = e == cudaSuccess ? "no CUDA device found" : cudaGetErrorString(e);
  return false;
}

std::unique_ptr<Executor> make_cuda_executor(const Graph& g, const ModelWeights& w, const ExecutorOptions& opt) {
  if (std::string why; !cuda_device_available(&why)) throw Error("cuda executor: no usable GPU here (" + why + ")");
  return std::make_unique<CudaExecutor>(g, w, opt);
}

}  // namespace spindle

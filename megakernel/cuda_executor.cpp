#include "megakernel/cuda_executor.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>
#include <vector>

#include "host/schedule.h"
#include "megakernel/cuda_check.h"
#include "megakernel/cuda_handles.h"
#include "megakernel/device_buffer.h"
#include "megakernel/device_model.h"
#include "megakernel/failure_message.h"
#include "megakernel/megakernel.h"
#include "megakernel/per_op.h"
#include "megakernel/tile_layout.h"
#include "tasks/error.h"

namespace spindle {

using cuda::DeviceBuffer;

namespace {

// Attention scores of one tile of positions stay in shared memory; a longer chunk is scored
// twice (once for its max, once for its weights) rather than held whole.
constexpr uint32_t kAttnScoreBytes = 64 * 1024;

uint32_t attn_positions_per_tile(const SpGraphParams& p) {
  const uint32_t group = p.n_heads / p.n_kv_heads;
  const uint32_t longest_chunk = (p.context + p.attn_chunks - 1) / p.attn_chunks;
  return std::max(1u, std::min(longest_chunk, kAttnScoreBytes / (4 * group)));
}

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
  const uint32_t group = p.n_heads / p.n_kv_heads;
  if (group > cuda::kAttnMaxGroup || group * p.head_dim > cuda::kAttnPairsPerThread * cuda::kBlockThreads)
    throw Error("cuda executor: attention groups of " + std::to_string(group) + " q heads of dim " +
                std::to_string(p.head_dim) + " are more than the attention tile holds");
  for (uint32_t i = 0; i < g.tasks.size(); ++i) {
    const SpTask& t = g.tasks[i];
    if (!sp_opcode_name(t.op)) unsupported(i, t, "opcode " + std::to_string(t.op) + " has no device tile");
    if (t.op == SP_OP_GEMV) {
      const uint32_t dtype = g.views[t.operand[3]].dtype;
      if (dtype != SP_BF16 && dtype != SP_F32) unsupported(i, t, "the output is neither bf16 nor f32");
      if ((t.operand[5] & 1u) && t.operand[6] == SP_NO_VIEW)
        unsupported(i, t, "the argmax flag is set but no partials view");
    }
    if (t.op == SP_OP_SAMPLE && t.operand[2] == 0) unsupported(i, t, "no argmax partials");
  }
}

// Dynamic shared memory one block needs for the largest tile of the graph.
size_t tile_smem_bytes(const Graph& g, uint32_t attn_positions) {
  const SpGraphParams& p = g.params;
  size_t bytes = cuda::kTileScratchBytes;
  for (const SpTask& t : g.tasks) {
    if (t.op == SP_OP_GEMV || t.op == SP_OP_GATE_UP)
      bytes = std::max<size_t>(bytes, cuda::projection_smem_bytes(g.views[t.operand[0]].cols));
    if (t.op == SP_OP_ATTN_CHUNK)
      bytes = std::max<size_t>(bytes, cuda::attn_smem_bytes(p.n_heads / p.n_kv_heads, p.head_dim, attn_positions));
  }
  return bytes;
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
  DeviceBuffer tasks, counters, control, list_begin, list_tasks, trace;
  std::vector<cuda::Stage> stages;
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
      cuda::launch_step_per_op(graph, stages, smem, stream.get());
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

CudaExecutor::CudaExecutor(const Graph& g, const ModelWeights& w, const ExecutorOptions& opt,
                           const MegakernelTuning& tuning)
    : Executor(g), opt_(opt), tuning_(tuning) {
  check_supported(g);
  dev_ = std::make_unique<Device>(g, w);
  Device& d = *dev_;
  d.tasks = upload(g.tasks, "the task table");
  d.counters = DeviceBuffer(size_t(g.num_counters()) * sizeof(uint32_t), "the counters");
  SP_CUDA(cudaMemset(d.counters.data(), 0, d.counters.bytes()));
  d.control = DeviceBuffer(sizeof(cuda::RunControl), "the run control block");
  SP_CUDA(cudaMemset(d.control.data(), 0, d.control.bytes()));

  const uint32_t attn_positions = attn_positions_per_tile(g.params);
  d.smem = tile_smem_bytes(g, attn_positions);
  int device = 0, smem_limit = 0, sms = 0;
  SP_CUDA(cudaGetDevice(&device));
  SP_CUDA(cudaDeviceGetAttribute(&smem_limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  SP_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  if (d.smem > size_t(smem_limit))
    throw Error("cuda executor: the graph's largest tile needs " + std::to_string(d.smem) +
                " bytes of shared memory; a block may have " + std::to_string(smem_limit));

  if (opt.cuda_mode == CudaMode::Megakernel) {
    if (tuning.blocks_per_sm != 1 && tuning.blocks_per_sm != 2)
      throw Error("cuda executor: blocks_per_sm is 1 or 2, not " + std::to_string(tuning.blocks_per_sm));
    const uint32_t resident = cuda::megakernel_blocks_per_sm(tuning.blocks_per_sm, d.smem) * uint32_t(sms);
    if (resident == 0) throw Error("cuda executor: the persistent kernel does not fit on an SM");
    blocks_ = std::min(opt.workers ? opt.workers : tuning.blocks_per_sm * uint32_t(sms), resident);
    if (opt.schedule == ScheduleKind::Static) {
      std::vector<uint32_t> begin{0}, tasks;
      for (const std::vector<uint32_t>& list : static_lists(g, blocks_)) {
        tasks.insert(tasks.end(), list.begin(), list.end());
        begin.push_back(uint32_t(tasks.size()));
      }
      d.list_begin = upload(begin, "the static schedule");
      d.list_tasks = upload(tasks, "the static schedule");
    }
  } else {
    cuda::prepare_stage_kernel(d.smem);
    d.stages = cuda::graph_stages(g);
  }

  d.graph = cuda::DeviceGraph{d.model.context(),      d.tasks.as<const SpTask>(),
                              uint32_t(g.tasks.size()), attn_positions,
                              d.counters.as<uint32_t>(), d.list_begin.as<const uint32_t>(),
                              d.list_tasks.as<const uint32_t>(), d.control.as<cuda::RunControl>()};
  if (opt.cuda_mode == CudaMode::Graph) d.capture_step_graph();
  logits_.resize(g.views[g.io.logits].cols);
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
  return "cuda megakernel (" + std::to_string(blocks_) + " blocks x " + std::to_string(cuda::kBlockThreads) +
         " threads, " + schedule_kind_name(opt_.schedule) + (tuning_.claim_ahead ? ", claim ahead" : "") +
         (tuning_.prefetch_bytes ? ", prefetch " + std::to_string(tuning_.prefetch_bytes) + " B" : "") + ")" + on;
}

std::span<const float> CudaExecutor::logits() const { return logits_; }

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
  const uint64_t trace_bytes = uint64_t(steps) * graph_.tasks.size() * sizeof(cuda::DeviceTrace);
  if (tracing_ && d.trace.bytes() < trace_bytes) d.trace = DeviceBuffer(trace_bytes, "the trace");
  cuda::RunControl control{};
  control.step_base = steps_done_;
  control.state_step_base = state().step;
  control.trace = tracing_ ? d.trace.as<cuda::DeviceTrace>() : nullptr;
  SP_CUDA(cudaMemcpyAsync(d.control.data(), &control, sizeof control, cudaMemcpyHostToDevice, d.stream.get()));
  SP_CUDA(cudaMemcpyAsync(d.model.arena(SP_ARENA_STATE), state_arena_.data(), state_arena_.size(),
                          cudaMemcpyHostToDevice, d.stream.get()));

  SP_CUDA(cudaEventRecord(d.start.get(), d.stream.get()));
  if (opt_.cuda_mode == CudaMode::Megakernel) {
    const uint32_t per_launch = opt_.steps_per_launch ? opt_.steps_per_launch : steps;
    for (uint32_t done = 0; done < steps; done += per_launch) {
      SP_CUDA(cudaMemsetAsync(&d.control.as<cuda::RunControl>()->ticket, 0, sizeof(unsigned long long), d.stream.get()));
      const cuda::MegakernelLaunch launch{steps_done_ + done, std::min(per_launch, steps - done),
                                          uint64_t(opt_.watchdog_ms) * 1000000u, tuning_.claim_ahead,
                                          tuning_.prefetch_bytes};
      cuda::launch_megakernel(d.graph, tuning_.blocks_per_sm, blocks_, d.smem, launch, d.stream.get());
    }
  } else {
    for (uint32_t s = 0; s < steps; ++s) {
      if (opt_.cuda_mode == CudaMode::Graph) SP_CUDA(cudaGraphLaunch(d.step_graph.get(), d.stream.get()));
      else cuda::launch_step_per_op(d.graph, d.stages, d.smem, d.stream.get());
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
    throw Error(cuda::failure_message(control.failure, graph_, opt_.watchdog_ms));
  }
  SP_CUDA(cudaMemcpy(state_arena_.data(), d.model.arena(SP_ARENA_STATE), state_arena_.size(), cudaMemcpyDeviceToHost));
  const SpView& lv = graph_.views[graph_.io.logits];
  SP_CUDA(cudaMemcpy(logits_.data(), d.model.arena(lv.arena) + sp_view_offset(lv), logits_.size() * sizeof(float),
                     cudaMemcpyDeviceToHost));
  if (!tracing_) return;
  std::vector<cuda::DeviceTrace> records(size_t(steps) * graph_.tasks.size());
  SP_CUDA(cudaMemcpy(records.data(), d.trace.data(), records.size() * sizeof(cuda::DeviceTrace), cudaMemcpyDeviceToHost));
  if (trace_epoch_ns_ == 0)
    trace_epoch_ns_ = std::min_element(records.begin(), records.end(), [](const auto& a, const auto& b) {
                        return a.start_ns < b.start_ns;
                      })->start_ns;
  for (const cuda::DeviceTrace& r : records)
    trace_.push_back({r.step, r.task, r.worker, r.start_ns - trace_epoch_ns_, r.end_ns - trace_epoch_ns_, r.wait_ns});
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

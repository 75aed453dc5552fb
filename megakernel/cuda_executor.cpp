#include "megakernel/cuda_executor.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>
#include <vector>

#include "megakernel/cuda_check.h"
#include "megakernel/cuda_runner.h"
#include "megakernel/failure_message.h"
#include "megakernel/tile_layout.h"
#include "ops/attention.h"
#include "tasks/error.h"
#include "tasks/gang.h"
#include "tasks/gemv_piece.h"
#include "tasks/gemv_split.h"
#include "tasks/mlp_shape.h"
#include "tasks/op_decls.h"

namespace spindle {

namespace {

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
    if (!(sp_op_executors(t.op) & (SP_ON_CUDA_PLAIN | SP_ON_CUDA_MOE | SP_ON_CUDA_TWO_HOP | SP_ON_CUDA_PER_OP)))
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

}  // namespace

CudaExecutor::CudaExecutor(const Graph& g, const ModelWeights& w, const ExecutorOptions& opt)
    : Executor(g), opt_(opt) {
  check_supported(g);
  const bool gangs = std::any_of(g.tasks.begin(), g.tasks.end(), [](const SpTask& t) { return sp_gang_width(t) > 1; });
  dev_ = std::make_unique<cuda::SharedDevice>(g, w, gangs);
  runner_ = cuda::make_runner(g, opt, *dev_);
  logits_.resize(g.views[g.io.logits].cols);
  // The counters', control block's and progress' cudaMemsets run on the legacy default stream,
  // which the executor's non-blocking stream does not wait for: without this, a first run
  // could start on memory still holding an earlier owner's bytes and see the zeros land mid-run
  // (waits that never end, or tasks that run before their inputs).
  SP_CUDA(cudaDeviceSynchronize());
}

CudaExecutor::~CudaExecutor() = default;

uint32_t CudaExecutor::workers() const { return runner_->workers(); }

std::string CudaExecutor::describe() const {
  cudaDeviceProp prop{};
  int device = 0;
  const bool named = cudaGetDevice(&device) == cudaSuccess && cudaGetDeviceProperties(&prop, device) == cudaSuccess;
  return runner_->describe() + (named ? std::string(" on ") + prop.name : "");
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
  cuda::SharedDevice& d = *dev_;
  const uint64_t trace_bytes = runner_->trace_records(steps) * sizeof(cuda::DeviceTrace);
  if (tracing_ && d.trace.bytes() < trace_bytes) d.trace = cuda::DeviceBuffer(trace_bytes, "the trace");
  if (tracing_ && runner_->writes_some_records())
    SP_CUDA(cudaMemsetAsync(d.trace.data(), 0, trace_bytes, d.stream.get()));
  cuda::RunControl control{};
  control.step_base = steps_done_;
  control.state_step_base = state().step;
  control.trace = tracing_ ? d.trace.as<cuda::DeviceTrace>() : nullptr;
  control.progress = runner_->progress();
  SP_CUDA(cudaMemcpyAsync(d.control.data(), &control, sizeof control, cudaMemcpyHostToDevice, d.stream.get()));
  SP_CUDA(cudaMemcpyAsync(d.model.arena(SP_ARENA_STATE), state_arena_.data(), state_arena_.size(),
                          cudaMemcpyHostToDevice, d.stream.get()));
  SP_CUDA(cudaEventRecord(d.start.get(), d.stream.get()));
  runner_->launch({steps, steps_done_, state().position});
  SP_CUDA(cudaEventRecord(d.stop.get(), d.stream.get()));
  SP_CUDA(cudaStreamSynchronize(d.stream.get()));
  float ms = 0;
  SP_CUDA(cudaEventElapsedTime(&ms, d.start.get(), d.stop.get()));
  last_run_ms_ = ms;
}

void CudaExecutor::read_back(uint32_t steps) {
  cuda::SharedDevice& d = *dev_;
  cuda::RunControl control{};
  SP_CUDA(cudaMemcpy(&control, d.control.data(), sizeof control, cudaMemcpyDeviceToHost));
  if (control.failure.kind != cuda::kFailNone) {
    broken_ = true;  // the counters no longer match any whole number of steps
    throw Error(cuda::failure_message(control.failure, graph_, opt_.watchdog_ms) + runner_->blocks_report());
  }
  SP_CUDA(cudaMemcpy(state_arena_.data(), d.model.arena(SP_ARENA_STATE), state_arena_.size(), cudaMemcpyDeviceToHost));
  const SpView& lv = graph_.views[graph_.io.logits];
  SP_CUDA(cudaMemcpy(logits_.data(), d.model.arena(lv.arena) + sp_view_offset(lv), logits_.size() * sizeof(float),
                     cudaMemcpyDeviceToHost));
  if (!tracing_) return;
  std::vector<cuda::DeviceTrace> records(runner_->trace_records(steps));
  SP_CUDA(cudaMemcpy(records.data(), d.trace.data(), records.size() * sizeof(cuda::DeviceTrace), cudaMemcpyDeviceToHost));
  runner_->records_as_tasks(records);
  if (trace_epoch_ns_ == 0 && !records.empty())
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

// The kernel-per-op baseline (a launch a stage, each running its op's tile in every block) and
// its CUDA graph (one step of those launches captured once and replayed each step).
#include <cuda_runtime_api.h>

#include <algorithm>

#include "megakernel/cuda_check.h"
#include "megakernel/cuda_runner.h"
#include "megakernel/per_op.h"
#include "megakernel/task_smem.h"

namespace spindle::cuda {
namespace {

class StageRunner final : public Runner {
 public:
  StageRunner(const Graph& g, const ExecutorOptions& opt, SharedDevice& d, const LaunchLimits& limits)
      : mode_(opt.cuda_mode), d_(d), stages_(graph_stages(g)), tasks_(upload(g.tasks, "the task table")) {
    prepare_stage_kernel(limits.tile_smem);
    for (Stage& st : stages_)  // each launch asks for what its own tiles need
      for (uint32_t i = st.first_task; i < st.first_task + st.tasks; ++i)
        st.smem = std::max(st.smem, task_smem_bytes(g, g.tasks[i], limits.score_positions, limits.kv_positions));
    DeviceTables tables;
    tables.tasks = tasks_.as<const SpTask>();
    graph_ = device_graph(g, d, limits, tables);
    n_tasks_ = uint32_t(g.tasks.size());
    if (mode_ == CudaMode::Graph) capture_step_graph();
  }

  void launch(const RunSteps& run) override {
    for (uint32_t s = 0; s < run.steps; ++s) {
      if (mode_ == CudaMode::Graph) SP_CUDA(cudaGraphLaunch(step_graph_.get(), d_.stream.get()));
      else launch_step_per_op(graph_, stages_, d_.stream.get());
    }
  }

  std::string describe() const override {
    return std::string("cuda ") + cuda_mode_name(mode_) + " (" + std::to_string(stages_.size()) + " launches per step)";
  }

  size_t trace_records(uint32_t steps) const override { return size_t(steps) * n_tasks_; }

 private:
  // One step of per-op launches, captured once and replayed per step.
  void capture_step_graph() {
    SP_CUDA(cudaStreamBeginCapture(d_.stream.get(), cudaStreamCaptureModeThreadLocal));
    cudaGraph_t raw = nullptr;
    try {
      launch_step_per_op(graph_, stages_, d_.stream.get());
    } catch (...) {
      cudaStreamEndCapture(d_.stream.get(), &raw);  // ends the capture; the error thrown is the cause
      CapturedGraph discard(raw);
      throw;
    }
    SP_CUDA(cudaStreamEndCapture(d_.stream.get(), &raw));
    const CapturedGraph captured(raw);
    cudaGraphExec_t exec = nullptr;
    SP_CUDA(cudaGraphInstantiate(&exec, captured.get(), 0));
    step_graph_ = GraphExec(exec);
  }

  const CudaMode mode_;
  SharedDevice& d_;
  std::vector<Stage> stages_;  // a launch each
  DeviceBuffer tasks_;
  DeviceGraph graph_{};
  uint32_t n_tasks_ = 0;
  GraphExec step_graph_;  // CudaMode::Graph
};

}  // namespace

std::unique_ptr<Runner> make_stage_runner(const Graph& g, const ExecutorOptions& opt, SharedDevice& d,
                                          const LaunchLimits& limits) {
  return std::make_unique<StageRunner>(g, opt, d, limits);
}

}  // namespace spindle::cuda

// The Vulkan executor: the graph's steps as dispatches of one persistent compute shader
// (shaders/persistent.comp) whose workgroups claim tasks by ticket, wait on the counters and
// run the tiles, bit for bit what the CPU executors compute (docs/vulkan.md). A dispatch is
// bounded (lavapipe stops any invocation's loops after 65,535 back-edges), so the host
// re-dispatches until the counters say the steps are done, and reports a run that stops
// making progress. Greedy sampling only, as on CUDA.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "host/executor.h"

namespace spindle {

class VulkanExecutor final : public Executor {
 public:
  // Workgroups a run may have, whatever the device allows: beyond those a device runs at once
  // they only queue (on lavapipe 1000 of them took 133 s for two steps of the tiny model), and
  // each holds a claim slot in the control block read back after every dispatch. 65535 is the
  // least maxComputeWorkGroupCount[0] Vulkan guarantees, so a count one device takes, all do.
  static constexpr uint32_t kMaxWorkers = 65535;

  // Tuned by opt.vulkan. Throws spindle::Error when no usable device is found, the graph
  // needs what the shaders lack, a knob has a value the shaders do not take, opt.workers is
  // more than kMaxWorkers or the device's workgroups in a dispatch, or memory runs out (naming
  // the buffer and the bytes).
  VulkanExecutor(const Graph& g, const ModelWeights& w, const ExecutorOptions& opt);
  ~VulkanExecutor() override;

  // Uploads the STATE arena, dispatches until the steps are done, reads STATE and the logits
  // back. Throws spindle::Error when the state asks for temperature > 0, on a device failure
  // (token or position out of range) and when no task finishes for watchdog_ms; the executor
  // then refuses to run again.
  void run_steps(uint32_t steps) override;
  std::string describe() const override;
  std::span<const float> logits() const override;
  void clear_recurrent_state() override { clear_recurrent_ = true; }
  uint32_t worker_count() const override { return workers_; }
  // The persistent pipeline's statistics where the device has VK_KHR_pipeline_executable_properties.
  std::vector<PipelineStatistic> pipeline_statistics() const override;

  // Dispatches the last run_steps took.
  uint32_t last_run_dispatches() const { return last_run_dispatches_; }

 private:
  struct Device;
  void run_chunk(uint32_t steps);
  // The run's records, its start `run_ns` after the first traced run's, its shader clock then.
  void read_trace(uint32_t steps, uint64_t run_ns, uint64_t run_clock);

  ExecutorOptions opt_;
  std::unique_ptr<Device> dev_;
  uint32_t workers_ = 0, warps_ = 0, shuffle_width_ = 0, dot_unroll_ = 0, attn_unroll_ = 0;
  bool poll_by_load_ = false;
  std::vector<float> logits_;
  uint32_t last_run_dispatches_ = 0;
  std::optional<std::chrono::steady_clock::time_point> trace_epoch_;  // the first traced run's start
  bool broken_ = false;
  bool clear_recurrent_ = false;  // the next run zeroes the RECURRENT arena first
};

}  // namespace spindle

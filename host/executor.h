// Executors run a graph's steps against bound memory. All of them give bit-identical
// results for the same graph (docs/numerics.md); they differ in how tasks reach workers.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "host/model_weights.h"
#include "tasks/graph.h"

namespace spindle {

enum class ExecutorKind { Sequential, SequentialF64, Threaded, Cuda, Vulkan };
enum class ScheduleKind { Ticket, Static };
enum class CudaMode { Megakernel, PerOp, Graph };

struct ExecutorOptions {
  ExecutorKind kind = ExecutorKind::Threaded;
  uint32_t workers = 0;                    // threads, CUDA blocks or Vulkan workgroups; 0 = the machine's count
  ScheduleKind schedule = ScheduleKind::Ticket;
  uint32_t watchdog_ms = 30000;            // a wait longer than this is an error
  CudaMode cuda_mode = CudaMode::Megakernel;
  uint32_t steps_per_launch = 0;           // megakernel: steps one launch may run; 0 = all asked
  int32_t device = -1;                     // vulkan: index in list_vulkan_devices(); -1 = the best usable
};

// The best executor this build and machine offer: cuda when a GPU is usable, else threaded.
ExecutorKind best_executor_kind();

// Parse the CLI spellings; unknown names throw spindle::Error listing the valid ones.
ExecutorKind parse_executor_kind(const std::string& s);  // auto, sequential, fp64, threaded, cuda, vulkan
ScheduleKind parse_schedule_kind(const std::string& s);  // ticket, static
CudaMode parse_cuda_mode(const std::string& s);          // megakernel, per-op, graph
const char* executor_kind_name(ExecutorKind k);
const char* schedule_kind_name(ScheduleKind k);
const char* cuda_mode_name(CudaMode m);

// One worker's trace record for one task of one step.
struct TaskTrace {
  uint32_t step, task, worker;
  uint64_t start_ns, end_ns, wait_ns;
};

class Executor {
 public:
  virtual ~Executor() = default;
  // Runs the next `steps` decode steps, continuing from the steps already run.
  virtual void run_steps(uint32_t steps) = 0;
  virtual std::string describe() const = 0;
  // The logits of the last step run.
  virtual std::span<const float> logits() const = 0;
  // Workers that take tasks (threads, CUDA blocks or Vulkan workgroups).
  virtual uint32_t worker_count() const { return 1; }

  // The STATE arena, as the host sees it between runs (device executors upload it before a
  // run and read it back after).
  SpStepState& state();
  std::span<uint32_t> forced_tokens();
  std::span<const uint32_t> out_tokens() const;

  void set_tracing(bool on) { tracing_ = on; }
  const std::vector<TaskTrace>& trace() const { return trace_; }

 protected:
  explicit Executor(const Graph& g);
  const Graph& graph_;
  std::vector<uint8_t> state_arena_;
  uint32_t steps_done_ = 0;
  bool tracing_ = false;
  std::vector<TaskTrace> trace_;
};

// Throws spindle::Error when the kind is not available in this build or on this machine.
std::unique_ptr<Executor> make_executor(const Graph& g, const ModelWeights& w, const ExecutorOptions& opt);

}  // namespace spindle

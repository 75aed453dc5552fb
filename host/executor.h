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

enum class ExecutorKind { Sequential, SequentialF64, Threaded };
enum class ScheduleKind { Ticket, Static };

struct ExecutorOptions {
  ExecutorKind kind = ExecutorKind::Threaded;
  uint32_t workers = 0;                    // threaded: 0 = hardware threads
  ScheduleKind schedule = ScheduleKind::Ticket;
  uint32_t watchdog_ms = 30000;            // a wait longer than this is an error
};

ExecutorKind parse_executor_kind(const std::string& s);  // "sequential", "fp64", "threaded"
ScheduleKind parse_schedule_kind(const std::string& s);  // "ticket", "static"
const char* executor_kind_name(ExecutorKind k);
const char* schedule_kind_name(ScheduleKind k);

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

  // Host access to the bound memory between runs.
  SpStepState& state();
  std::span<const float> logits() const;
  std::span<uint32_t> forced_tokens();
  std::span<const uint32_t> out_tokens() const;

  void set_tracing(bool on) { tracing_ = on; }
  const std::vector<TaskTrace>& trace() const { return trace_; }

 protected:
  Executor(const Graph& g, const ModelWeights& w);
  const Graph& graph_;
  std::vector<std::vector<uint8_t>> owned_;  // STATE, WORK, KV, CONST arenas
  std::vector<uint8_t*> arena_base_;         // every arena, weights included
  uint32_t steps_done_ = 0;
  bool tracing_ = false;
  std::vector<TaskTrace> trace_;
};

std::unique_ptr<Executor> make_executor(const Graph& g, const ModelWeights& w,
                                        const ExecutorOptions& opt);

}  // namespace spindle

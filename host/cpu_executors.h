// The CPU executors: the sequential reference and the threaded executor that runs the GPU's
// queue protocol (monotonic counters, acquire/release, ticket or static lists) on threads.
#pragma once
#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "host/executor.h"
#include "ops/context.h"

namespace spindle {

// Host memory for every arena: WORK, KV, CONST, RECURRENT and SYMMETRIC owned here, weights
// bound in place. A graph over several devices (graph.h devices) gets each device's STATE,
// WORK, KV and RECURRENT arenas apart, and CONST, SYMMETRIC and the weights shared: the
// in-process exchange of docs/multi-device.md, where a write into the symmetric arena reaches
// every device. The host sees device 0's step state and logits; after each run every device's
// step state must equal it (every device chose the same tokens).
class CpuExecutor : public Executor {
 public:
  std::span<const float> logits() const override;
  void clear_recurrent_state() override;

 protected:
  // `shard_weights`: ExecutorOptions::shard_weights.
  CpuExecutor(const Graph& g, const ModelWeights& w, bool shard_weights);
  TileContext tile_context(uint32_t device);
  // Before a run: the host's step state (device 0's) copied to the other devices.
  void share_step_state();
  // After a run: throws spindle::Error when a device's step state differs from device 0's.
  void check_devices_agree() const;
  // A trace record's time: ns since the executor was made, one clock across all its runs.
  uint64_t trace_ns() const {
    using std::chrono::steady_clock, std::chrono::nanoseconds, std::chrono::duration_cast;
    return uint64_t(duration_cast<nanoseconds>(steady_clock::now() - epoch_).count());
  }

  std::vector<std::vector<uint8_t>> owned_;        // the arenas allocated here, any device's
  std::vector<std::vector<uint8_t*>> arena_base_;  // a device's arenas, by SpArena / weight arena id

 private:
  std::chrono::steady_clock::time_point epoch_ = std::chrono::steady_clock::now();
};

// Runs every task in the graph's topological order on the calling thread. Acc = double is
// the fp64 "truth" mode (docs/numerics.md).
template <class Acc>
class SequentialExecutor final : public CpuExecutor {
 public:
  SequentialExecutor(const Graph& g, const ModelWeights& w, bool shard_weights)
      : CpuExecutor(g, w, shard_weights) {}
  void run_steps(uint32_t steps) override;
  std::string describe() const override;
};

class ThreadedExecutor final : public CpuExecutor {
 public:
  // Workers it takes at most. Each is an OS thread, started anew by every run_steps with its own
  // stack (8 MiB of address space by default): 4096 is far more than any machine's cores, which
  // more would only oversubscribe, and within the usual per-user limits on threads.
  static constexpr uint32_t kMaxWorkers = 4096;

  // Throws spindle::Error when opt.workers is more than kMaxWorkers. Over several devices
  // (graph.h devices) it starts opt.workers threads for each, each group taking its device's
  // tasks, its counters its own but for the broadcast ones, whose signals it adds on every device.
  ThreadedExecutor(const Graph& g, const ModelWeights& w, const ExecutorOptions& opt);
  // Throws spindle::Error when a worker fails or a thread cannot be started (the system's
  // limit on threads or memory); the executor then refuses to run again.
  void run_steps(uint32_t steps) override;
  std::string describe() const override;
  uint32_t worker_count() const override { return workers_ * graph_.devices; }

 private:
  // The first exception a worker threw, the cause; the workers stopped by the abort it sets
  // throw the others.
  struct FirstFailure {
    std::exception_ptr error;
    std::mutex mutex;
  };
  std::vector<std::thread> start_workers(uint32_t steps, std::vector<std::vector<TaskTrace>>& traces,
                                         FirstFailure& failure);
  void worker(uint32_t id, uint32_t first_step, uint32_t steps, std::vector<TaskTrace>& trace);
  void run_one(uint32_t id, uint32_t device, uint32_t step, uint32_t task_index, std::vector<TaskTrace>& trace);
  void wait_for(const SpTask& t, uint32_t device, uint32_t task_index, uint32_t step);
  std::atomic<uint32_t>& counter(uint32_t device, uint32_t c) { return counters_[size_t(device) * graph_.num_counters() + c]; }

  ExecutorOptions opt_;
  uint32_t workers_;  // a device's; worker id w runs device w / workers_'s tasks
  std::unique_ptr<std::atomic<uint32_t>[]> counters_;  // each device's, device-major
  std::vector<std::vector<uint32_t>> device_tasks_;    // the tasks each device runs, in order
  std::vector<std::vector<uint32_t>> lists_;           // static schedule, by worker id
  std::unique_ptr<std::atomic<uint64_t>[]> tickets_;   // each device's
  std::atomic<bool> abort_{false};
  bool broken_ = false;
};

}  // namespace spindle

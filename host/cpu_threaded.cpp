#include <string>
#include <system_error>

#include "host/cpu_executors.h"
#include "host/schedule.h"
#include "ops/run_task.h"
#include "tasks/counters.h"
#include "tasks/error.h"

namespace spindle {
namespace {

// A device's workers: `requested`, or the machine's cores shared over the devices.
uint32_t resolve_workers(uint32_t requested, uint32_t devices) {
  if (uint64_t(requested) * devices > ThreadedExecutor::kMaxWorkers)
    throw Error("threaded executor: --workers " + std::to_string(requested) +
                (devices > 1 ? " on each of " + std::to_string(devices) + " devices" : std::string()) + " is more than " +
                std::to_string(ThreadedExecutor::kMaxWorkers) + ", the most threads it starts (one a worker)");
  if (requested) return requested;
  return std::max(1u, std::thread::hardware_concurrency() / devices);
}

}  // namespace

ThreadedExecutor::ThreadedExecutor(const Graph& g, const ModelWeights& w, const ExecutorOptions& opt)
    : CpuExecutor(g, w, opt.shard_weights),
      opt_(opt),
      workers_(resolve_workers(opt.workers, g.devices)),
      counters_(new std::atomic<uint32_t>[size_t(g.devices) * g.num_counters()]),
      tickets_(new std::atomic<uint64_t>[g.devices]) {
  for (size_t c = 0; c < size_t(g.devices) * g.num_counters(); ++c) counters_[c].store(0, std::memory_order_relaxed);
  for (uint32_t d = 0; d < g.devices; ++d) {
    device_tasks_.push_back(device_tasks(g, d));
    if (opt.schedule != ScheduleKind::Static) continue;
    for (std::vector<uint32_t>& list : static_lists(device_tasks_.back(), workers_)) lists_.push_back(std::move(list));
  }
}

std::string ThreadedExecutor::describe() const {
  const std::string devices = graph_.devices > 1 ? " on each of " + std::to_string(graph_.devices) + " devices" : "";
  return "threaded (" + std::to_string(workers_) + " workers" + devices + ", " + schedule_kind_name(opt_.schedule) + ")";
}

// Waits until the task's counter reaches its target for `step`. Workers may outnumber
// cores, so the wait spins briefly, then yields, then sleeps: a pure spin would starve the
// worker it waits for. A wait past the watchdog bound is an error naming the task.
void ThreadedExecutor::wait_for(const SpTask& t, uint32_t device, uint32_t task_index, uint32_t step) {
  const uint32_t target = sp_wait_target(t, step);
  std::atomic<uint32_t>& c = counter(device, t.wait_counter);
  const auto start = std::chrono::steady_clock::now();
  for (uint32_t spins = 0; !sp_counter_reached(c.load(std::memory_order_acquire), target); ++spins) {
    if (abort_.load(std::memory_order_relaxed)) throw Error("aborted");
    if (spins < 64) continue;
    if (spins < 256) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    if (std::chrono::steady_clock::now() - start > std::chrono::milliseconds(opt_.watchdog_ms)) {
      const uint32_t value = c.load(std::memory_order_acquire);
      throw Error("watchdog: task " + std::to_string(task_index) + " (" + sp_opcode_name(t.op) + ")" +
                  (graph_.devices > 1 ? " on device " + std::to_string(device) : std::string()) + " of step " +
                  std::to_string(step) + " waited over " + std::to_string(opt_.watchdog_ms) + " ms on counter " +
                  std::to_string(t.wait_counter) + " (" + graph_.counter_names[t.wait_counter] + "): value " +
                  std::to_string(value) + ", needs " + std::to_string(target));
    }
  }
}

void ThreadedExecutor::run_one(uint32_t id, uint32_t device, uint32_t step, uint32_t task_index,
                               std::vector<TaskTrace>& trace) {
  if (abort_.load(std::memory_order_relaxed)) throw Error("aborted");
  const SpTask& t = graph_.tasks[task_index];
  const uint64_t t0 = tracing_ ? trace_ns() : 0;
  wait_for(t, device, task_index, step);
  const uint64_t t1 = tracing_ ? trace_ns() : 0;
  run_task<float>(t, tile_context(device));
  if (graph_.is_broadcast(t.signal_counter))
    for (uint32_t d = 0; d < graph_.devices; ++d) counter(d, t.signal_counter).fetch_add(1, std::memory_order_release);
  else
    counter(device, t.signal_counter).fetch_add(1, std::memory_order_release);
  if (tracing_) trace.push_back({step, task_index, id, t1, trace_ns(), t1 - t0, TaskTrace::kNoSm, device});
}

void ThreadedExecutor::worker(uint32_t id, uint32_t first_step, uint32_t steps, std::vector<TaskTrace>& trace) {
  const uint32_t device = id / workers_;
  if (opt_.schedule == ScheduleKind::Static) {
    for (uint32_t s = 0; s < steps; ++s)
      for (uint32_t task : lists_[id]) run_one(id, device, first_step + s, task, trace);
    return;
  }
  // Dynamic ticket: claim the next task of the device's order. A task only waits on tasks
  // earlier in the graph's order: its device's, with smaller tickets, already claimed by
  // running workers, or another device's broadcast ones, which by the same argument there
  // finish; so this cannot deadlock.
  const std::vector<uint32_t>& tasks = device_tasks_[device];
  const uint64_t n = tasks.size(), total = uint64_t(steps) * n;
  std::atomic<uint64_t>& ticket = tickets_[device];
  for (uint64_t t = ticket.fetch_add(1, std::memory_order_relaxed); t < total;
       t = ticket.fetch_add(1, std::memory_order_relaxed))
    run_one(id, device, first_step + uint32_t(t / n), tasks[t % n], trace);
}

// One thread a worker. A thread the system cannot start ends the run: the workers already
// started are told to abort and joined, as their tasks may have moved the counters.
std::vector<std::thread> ThreadedExecutor::start_workers(uint32_t steps, std::vector<std::vector<TaskTrace>>& traces,
                                                         FirstFailure& failure) {
  const uint32_t all = workers_ * graph_.devices;
  std::vector<std::thread> threads;
  threads.reserve(all);
  for (uint32_t id = 0; id < all; ++id) {
    try {
      threads.emplace_back([this, &traces, &failure, id, steps] {
        try {
          worker(id, steps_done_, steps, traces[id]);
        } catch (...) {
          std::lock_guard lock(failure.mutex);
          if (!failure.error) failure.error = std::current_exception();
          abort_.store(true, std::memory_order_relaxed);
        }
      });
    } catch (const std::system_error& e) {
      abort_.store(true, std::memory_order_relaxed);
      for (std::thread& th : threads) th.join();
      broken_ = true;
      throw Error("threaded executor: cannot start worker thread " + std::to_string(id + 1) + " of " +
                  std::to_string(all) + ": " + e.code().message());
    }
  }
  return threads;
}

void ThreadedExecutor::run_steps(uint32_t steps) {
  if (broken_) throw Error("this executor stopped on an earlier error; make a new one");
  for (uint32_t d = 0; d < graph_.devices; ++d) tickets_[d].store(0, std::memory_order_relaxed);
  abort_.store(false, std::memory_order_relaxed);
  share_step_state();
  std::vector<std::vector<TaskTrace>> traces(size_t(workers_) * graph_.devices);
  FirstFailure failure;
  for (std::thread& th : start_workers(steps, traces, failure)) th.join();
  if (failure.error) {
    // The counters no longer match any whole number of steps.
    broken_ = true;
    std::rethrow_exception(failure.error);
  }
  steps_done_ += steps;
  check_devices_agree();
  for (auto& t : traces) trace_.insert(trace_.end(), t.begin(), t.end());
}

}  // namespace spindle

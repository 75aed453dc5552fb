#include "host/executor.h"

#include "host/cpu_executors.h"
#include "host/vulkan_devices.h"
#include "tasks/error.h"
#ifdef SPINDLE_HAVE_CUDA
#include "megakernel/cuda_executor.h"
#endif

namespace spindle {

ExecutorKind best_executor_kind() {
#ifdef SPINDLE_HAVE_CUDA
  if (cuda_device_available()) return ExecutorKind::Cuda;
#endif
  return ExecutorKind::Threaded;
}

ExecutorKind parse_executor_kind(const std::string& s) {
  if (s == "auto") return best_executor_kind();
  if (s == "sequential") return ExecutorKind::Sequential;
  if (s == "fp64") return ExecutorKind::SequentialF64;
  if (s == "threaded") return ExecutorKind::Threaded;
  if (s == "cuda") return ExecutorKind::Cuda;
  if (s == "vulkan") return ExecutorKind::Vulkan;
  throw Error("unknown executor '" + s + "' (valid: auto, sequential, fp64, threaded, cuda, vulkan)");
}

ScheduleKind parse_schedule_kind(const std::string& s) {
  if (s == "ticket") return ScheduleKind::Ticket;
  if (s == "static") return ScheduleKind::Static;
  throw Error("unknown schedule '" + s + "' (valid: ticket, static)");
}

CudaMode parse_cuda_mode(const std::string& s) {
  if (s == "megakernel") return CudaMode::Megakernel;
  if (s == "per-op") return CudaMode::PerOp;
  if (s == "graph") return CudaMode::Graph;
  throw Error("unknown CUDA mode '" + s + "' (valid: megakernel, per-op, graph)");
}

const char* executor_kind_name(ExecutorKind k) {
  switch (k) {
    case ExecutorKind::Sequential: return "sequential";
    case ExecutorKind::SequentialF64: return "fp64";
    case ExecutorKind::Threaded: return "threaded";
    case ExecutorKind::Cuda: return "cuda";
    case ExecutorKind::Vulkan: return "vulkan";
  }
  return "?";
}

const char* schedule_kind_name(ScheduleKind k) { return k == ScheduleKind::Ticket ? "ticket" : "static"; }

const char* cuda_mode_name(CudaMode m) {
  switch (m) {
    case CudaMode::Megakernel: return "megakernel";
    case CudaMode::PerOp: return "per-op";
    case CudaMode::Graph: return "graph";
  }
  return "?";
}

Executor::Executor(const Graph& g) : graph_(g), state_arena_(g.arenas.at(SP_ARENA_STATE).bytes, uint8_t(0)) {}

SpStepState& Executor::state() { return *reinterpret_cast<SpStepState*>(state_arena_.data()); }

namespace {
template <class T>
std::span<T> state_span(const Graph& g, const std::vector<uint8_t>& arena, uint32_t view) {
  const SpView& v = g.views[view];
  return {reinterpret_cast<T*>(const_cast<uint8_t*>(arena.data()) + sp_view_offset(v)), size_t(v.rows) * v.cols};
}
}  // namespace

std::span<uint32_t> Executor::forced_tokens() { return state_span<uint32_t>(graph_, state_arena_, graph_.io.forced_tokens); }
std::span<const uint32_t> Executor::out_tokens() const {
  return state_span<const uint32_t>(graph_, state_arena_, graph_.io.out_tokens);
}

std::unique_ptr<Executor> make_executor(const Graph& g, const ModelWeights& w, const ExecutorOptions& opt) {
  if (g.devices > 1 && (opt.kind == ExecutorKind::Cuda || opt.kind == ExecutorKind::Vulkan))
    throw Error(std::string("the graph is split over ") + std::to_string(g.devices) + " devices, which the " +
                executor_kind_name(opt.kind) +
                " executor does not run yet; the CPU executors (sequential, fp64, threaded) simulate them");
  if (opt.shard_weights && (opt.kind == ExecutorKind::Cuda || opt.kind == ExecutorKind::Vulkan))
    throw Error(std::string("the ") + executor_kind_name(opt.kind) +
                " executor holds every weight; only the CPU executors (sequential, fp64, threaded) shard them");
  switch (opt.kind) {
    case ExecutorKind::Sequential: return std::make_unique<SequentialExecutor<float>>(g, w, opt.shard_weights);
    case ExecutorKind::SequentialF64: return std::make_unique<SequentialExecutor<double>>(g, w, opt.shard_weights);
    case ExecutorKind::Threaded: return std::make_unique<ThreadedExecutor>(g, w, opt);
    case ExecutorKind::Cuda:
#ifdef SPINDLE_HAVE_CUDA
      return make_cuda_executor(g, w, opt);
#else
      throw Error("this build has no CUDA executor: nvcc was not found when it was configured");
#endif
    case ExecutorKind::Vulkan: return make_vulkan_executor(g, w, opt);
  }
  throw Error("unknown executor kind");
}

}  // namespace spindle

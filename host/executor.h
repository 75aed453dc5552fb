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

// How a Vulkan worker polls a counter (shaders/protocol.glsl).
enum class VulkanPoll {
  Device,     // Load on GPUs, AtomicAdd on CPU devices
  AtomicAdd,  // an atomic add of 0 (lavapipe once hoisted an atomic load out of the loop)
  Load,       // a relaxed atomic load
};

// Research knobs of the Vulkan executor's persistent shader (docs/vulkan.md, Knobs). None
// changes a result bit.
struct VulkanTuning {
  uint32_t warps = 0;          // logical warps (32 invocations) per workgroup; 0 = 1 on lavapipe, else 8
  uint32_t budget = 0;         // loop back-edges one invocation may take per dispatch; 0 = the device's
  uint32_t shuffle_width = 0;  // butterfly levels below it use subgroup shuffles (a power of two at most
                               // the subgroup size, 1 = none); 0 = the subgroup size, at most 32
  VulkanPoll poll = VulkanPoll::Device;
  uint32_t dot_unroll = 0;     // 256-element blocks of each weight row a warp loads per trip: 1, 2, 4 or 8;
                               // 0 = the deepest whose trip fits in the smallest projection K
  uint32_t attn_unroll = 0;    // positions whose K and V rows an attention warp loads together: 1, 2, 4 or 8;
                               // 0 = 1 on lavapipe, else 4
};

// MegakernelTuning::l2_prefetch_bytes that the executor resolves for its model with
// l2_prefetch_auto_bytes.
constexpr uint64_t kL2PrefetchAuto = ~0ull;

// The L2 prefetch budget a stage for a model of `hidden` size: 2 KiB per unit (the first 1024
// rows of a stage whose rows are hidden wide). The best of 1-16 MiB measured on both presets:
// 2 MiB on qwen3-0.6b (hidden 1024; 0.7% faster than 4 at position 1), 8 MiB on qwen3-8b (4096;
// 0.7% faster than 4) (docs/EXPERIMENTS.md).
constexpr uint64_t l2_prefetch_auto_bytes(uint32_t hidden) { return uint64_t(hidden) << 11; }

// Research knobs of the CUDA executor's persistent kernel; docs/EXPERIMENTS.md has what each
// measured. None changes a result bit.
struct MegakernelTuning {
  uint32_t blocks_per_sm = 1;   // 1, or 2 (the kernel built for at most 128 registers a thread);
                                // workers = 0 then means this many blocks per SM
  bool input_cache = true;      // consecutive tasks with the same normalised input compute it once
  bool merge_release = false;   // static lists: one release-add for consecutive tasks of a stage
  // Back-off between polls of a counter (16-64 measured 0.4-0.8% faster than 32-256, and
  // 64-512 2% slower: docs/EXPERIMENTS.md).
  uint32_t first_sleep_ns = 16, max_sleep_ns = 64;

  // Attention's shared memory (every CUDA mode): scores of a block of positions, and the K and
  // V rows staged at once; 0 = the defaults (32 KB, 160 KB; never more than the longest chunk
  // needs). Tests shrink them to a few positions to reach the multi-block paths.
  uint32_t attn_score_bytes = 0, attn_kv_bytes = 0;

  // Shared memory a projection task's weights may take, copied in before its wait (bulk
  // copies); a task whose weights are larger reads them from global memory. 0 = never. 192 KB
  // holds qwen3-0.6b's GATE_UP tasks and qwen3-30b-a3b's q/k/v tasks (160 KB), whose copies make
  // them faster, and leaves room for the tile within the two-hop build's shared memory; no
  // qwen3-8b projection task is that small (measured: docs/EXPERIMENTS.md).
  uint32_t weight_preload_bytes = 192u << 10;

  // Each task, once it has run, asks the L2 for its share of the weights of the stage this many
  // stages later, up to l2_prefetch_bytes of that stage's (its first tasks'); 0 = none;
  // kL2PrefetchAuto = l2_prefetch_auto_bytes of the model. More slows the tasks, which then wait
  // behind the prefetches (docs/EXPERIMENTS.md).
  uint32_t l2_prefetch_distance = 1;
  uint64_t l2_prefetch_bytes = kL2PrefetchAuto;

  // Run the graph as the cluster program instead (megakernel/cluster_program.h,
  // docs/two-hop-layer.md): the two-hop layer in clusters of 8 blocks, for a graph built with
  // --tune kv-head-waits=on --tune o-proj-split=8 --tune attn-chunks=8 --tune fused-mlp=PIECES/8. Same bits as the
  // other modes on that graph; the knobs above, but the attention ones, do not apply to it.
  bool cluster_program = false;
};

struct ExecutorOptions {
  ExecutorKind kind = ExecutorKind::Threaded;
  uint32_t workers = 0;                    // threads, CUDA blocks or Vulkan workgroups; 0 = the machine's count
  ScheduleKind schedule = ScheduleKind::Ticket;
  uint32_t watchdog_ms = 30000;            // a wait longer than this is an error
  CudaMode cuda_mode = CudaMode::Megakernel;
  uint32_t steps_per_launch = 0;           // megakernel: steps one launch may run; 0 = all asked
  int32_t device = -1;                     // vulkan: index in list_vulkan_devices(); -1 = the best usable
  VulkanTuning vulkan = {};
  MegakernelTuning megakernel = {};
  // The CPU executors: each device its own copy of its weight shard (tasks/weight_shard.h),
  // every other byte 0xFF (NaN), as a device of several holds only its shard; a run then gives
  // the bits of the shared weights only where each device reads within its shard. The GPU
  // executors refuse it.
  bool shard_weights = false;
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

// One statistic of an executor's compiled device code, as its driver names and reports it
// (Vulkan: VK_KHR_pipeline_executable_properties).
struct PipelineStatistic {
  std::string executable;  // the driver's name for the compiled stage
  std::string name, value;
};

// One worker's trace record for one task of one step.
struct TaskTrace {
  static constexpr uint32_t kNoSm = 0xFFFFFFFFu;
  uint32_t step, task, worker;  // worker: CUDA records the SM, the others their worker's index
  uint64_t start_ns, end_ns, wait_ns;
  uint32_t sm = kNoSm;  // Vulkan on NVIDIA: the SM the worker ran on; else kNoSm
  uint32_t device = 0;  // the device whose task ran (graph.h devices), 0 in a graph of one
};

class Executor {
 public:
  virtual ~Executor() = default;
  // Runs the next `steps` decode steps, continuing from the steps already run.
  virtual void run_steps(uint32_t steps) = 0;
  virtual std::string describe() const = 0;
  // The logits of the last step run.
  virtual std::span<const float> logits() const = 0;
  // Zeroes the per-sequence recurrent state (the RECURRENT arena: the Gated DeltaNet layers'
  // conv and delta-rule states), so that the next step starts a sequence.
  virtual void clear_recurrent_state() = 0;
  // Workers that take tasks (threads, CUDA blocks or Vulkan workgroups), every device's.
  virtual uint32_t worker_count() const { return 1; }
  // The driver's statistics of the compiled device code; empty where the executor or the
  // driver offers none.
  virtual std::vector<PipelineStatistic> pipeline_statistics() const { return {}; }

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

// Throws spindle::Error when the kind is not available in this build or on this machine, or
// is a GPU executor and the graph is split over several devices (only the CPU executors
// simulate those).
std::unique_ptr<Executor> make_executor(const Graph& g, const ModelWeights& w, const ExecutorOptions& opt);

}  // namespace spindle

#include "host/vulkan_executor.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <thread>

#include "host/vulkan_buffer.h"
#include "host/vulkan_context.h"
#include "host/vulkan_devices.h"
#include "host/vulkan_failure.h"
#include "host/vulkan_pipeline.h"
#include "host/vulkan_records.h"
#include "ops/qk_norm_rope.h"
#include "shaders/spirv.h"
#include "tasks/counters.h"
#include "tasks/gemv_piece.h"
#include "tasks/gemv_split.h"
#include "tasks/mlp_shape.h"
#include "tasks/error.h"
#include "tasks/op_decls.h"

namespace spindle {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kLanes = 32;              // invocations of a logical warp (shaders/workgroup.glsl)
constexpr uint32_t kHeadDimMax = 8 * kLanes;  // a lane keeps 8 dims of an attention head
constexpr uint32_t kGdnKeyMax = 8 * kLanes;   // a lane keeps 8 elements of a GDN state row
constexpr uint32_t kDotBlock = 8 * kLanes;    // elements of a row a warp reads at once (DOT_BLOCK, dot.glsl)
// Lavapipe ends an invocation's loops after 65,535 back-edges in all. The shader counts what
// lavapipe was measured to count; the limit was first passed at 110,000-150,000 of these
// units (tiny model, 1 to 8 warps), and the canary catches a shortfall.
constexpr uint32_t kLavapipeBudget = 60000;
// A wait longer than this ends its worker's dispatch: on lavapipe the producer may not be
// running (it runs LP_NUM_THREADS workgroups at once), elsewhere only the watchdog needs it.
constexpr double kLavapipeLongestSpinMs = 2;
constexpr double kLongestSpinMs = 100;
constexpr size_t kUploadChunk = size_t(64) << 20;
constexpr uint32_t kTicketLimit = 1u << 31;     // tickets of one run fit in 31 bits
static_assert(kVkNoSm == TaskTrace::kNoSm, "the trace's SM passes through as it is");

[[noreturn]] void unsupported(uint32_t task, const SpTask& t, const std::string& what) {
  const char* name = sp_opcode_name(t.op);
  throw Error("vulkan executor: task " + std::to_string(task) + " (" + (name ? name : "unknown opcode") + "): " + what);
}

// What the shaders cannot do is refused here, before anything runs.
void check_supported(const Graph& g) {
  const SpGraphParams& p = g.params;
  if (g.tasks.empty()) throw Error("vulkan executor: the graph has no tasks");
  if (p.n_kv_heads == 0 || p.n_heads % p.n_kv_heads)
    throw Error("vulkan executor: " + std::to_string(p.n_heads) + " q heads do not split over " +
                std::to_string(p.n_kv_heads) + " kv heads");
  if (p.head_dim > kHeadDimMax)
    throw Error("vulkan executor: head_dim " + std::to_string(p.head_dim) + " is more than the shaders' " +
                std::to_string(kHeadDimMax));
  for (uint32_t i = 0; i < g.tasks.size(); ++i) {
    const SpTask& t = g.tasks[i];
    if (!(sp_op_executors(t.op) & SP_ON_VULKAN)) unsupported(i, t, "opcode " + std::to_string(t.op) + " has no shader");
    if (t.op == SP_OP_GEMV) {
      const uint32_t dtype = g.views[t.operand[3]].dtype;
      if (dtype != SP_BF16 && dtype != SP_F32) unsupported(i, t, "the output is neither bf16 nor f32");
      if ((t.operand[5] & 1u) && t.operand[6] == SP_NO_VIEW) unsupported(i, t, "the argmax flag is set but no partials view");
      if (const char* problem = gemv_split_problem(t.operand[7], g.views[t.operand[0]].cols)) unsupported(i, t, problem);
    }
    if (t.op == SP_OP_SAMPLE && t.operand[2] == 0) unsupported(i, t, "no argmax partials");
    if (t.op == SP_OP_MLP)
      if (const char* problem = mlp_problem(t, g.views.data())) unsupported(i, t, problem);
    if (t.op == SP_OP_GEMV_PIECE)
      if (const char* problem = gemv_piece_problem(t, g.views.data())) unsupported(i, t, problem);
    if (t.op == SP_OP_GDN && g.views[t.operand[6]].cols > kGdnKeyMax)
      unsupported(i, t, "key heads of " + std::to_string(g.views[t.operand[6]].cols) +
                            " elements; the shader takes at most " + std::to_string(kGdnKeyMax));
  }
}

// Shared 16-byte vectors the graph's tiles need: the bf16 each op stages, 8 a vector (its
// declaration's staged_input: a projection's or a GEMV piece's input, an MLP member's normed
// hidden state and activations, the MoE tiles' inputs and routing words, a GDN head's q, k, v
// and output words), or an attention warp's normed head and the tile's k̂ after them (one
// element a word). The opcodes are checked first (check_supported).
uint32_t shared_vecs(const Graph& g, uint32_t warps) {
  uint32_t vecs = ((warps + 1) * g.params.head_dim + 3) / 4;
  // Staged inputs are rows of at most kMaxRowLength (+ a piece), or an MoE tile's at most 4096
  // slots' rows and words: their vectors fit in 32 bits.
  for (const SpTask& t : g.tasks)
    vecs = uint32_t(std::max<uint64_t>(vecs, (op_decl(t.op)->staged_input(g, t) + 7) / 8));
  return std::max(vecs, 1u);
}

// The opcodes of the graph's tasks, a bit each: the shader compiles only their tiles
// (GRAPH_OPS in persistent.comp). The opcodes are checked first (check_supported).
uint32_t graph_ops(const Graph& g) {
  static_assert(SP_OP_COUNT_ <= 32, "an opcode is a bit of a 32-bit specialization constant");
  uint32_t ops = 0;
  for (const SpTask& t : g.tasks) ops |= 1u << t.op;
  return ops;
}

// The butterfly's shuffle width: the subgroup size capped at a logical warp, or the tuning's.
uint32_t shuffle_width(const vk::DeviceTraits& d, uint32_t asked) {
  const uint32_t width = asked ? asked : std::min(d.subgroup_size, kLanes);
  if (width == 0 || (width & (width - 1)) || width > kLanes || width > d.subgroup_size)
    throw Error("vulkan executor: a shuffle width of " + std::to_string(width) + " is not a power of two up to " +
                std::to_string(std::min(d.subgroup_size, kLanes)) + " (the subgroup size of " + d.name + ", at most 32)");
  return width;
}

// An unroll depth of the shaders (a specialization constant): one of kUnrolls. Their cost
// functions count the unrolled loops' trips for any depth; the list keeps a lane's loads in
// flight, and so its registers, within what was meant.
constexpr uint32_t kUnrolls[] = {1, 2, 4, 8};

// The dot unroll when none is asked: the deepest whose trip (256 * N elements) fits in the
// smallest K of the graph's projections, so no lane's loads run past a row in every trip.
// Measured on the H200 (docs/EXPERIMENTS.md): qwen3-8b (K >= 4096) 6.72 ms/token
// at 8 against 7.69 at 4; qwen3-0.6b (K >= 1024) 1.75 at 4 against 1.87 at 8.
uint32_t default_dot_unroll(const Graph& g) {
  uint32_t k = UINT32_MAX;
  for (const SpTask& t : g.tasks)
    if (sp_projection_matrices(t.op)) k = std::min(k, g.views[t.operand[0]].cols);
  uint32_t unroll = kUnrolls[0];
  for (uint32_t u : kUnrolls)
    if (uint64_t(u) * kDotBlock <= k) unroll = u;
  return unroll;
}

uint32_t checked_unroll(uint32_t asked, const char* what) {
  if (std::find(std::begin(kUnrolls), std::end(kUnrolls), asked) != std::end(kUnrolls)) return asked;
  std::string allowed;
  for (uint32_t u : kUnrolls) allowed += (allowed.empty() ? "" : ", ") + std::to_string(u);
  throw Error(std::string("vulkan executor: ") + what + " unroll of " + std::to_string(asked) +
              " is not one the shaders take (" + allowed + ")");
}

// Lavapipe runs LP_NUM_THREADS workgroups of a dispatch at once (on the machines measured its
// default ran them one after another); a GPU one per SM where the driver says how many.
uint32_t default_workers(const vk::DeviceTraits& d) {
  if (d.lavapipe()) {
    const char* threads = std::getenv("LP_NUM_THREADS");
    return threads && std::atoi(threads) > 0 ? uint32_t(std::atoi(threads)) : 1;
  }
  return d.compute_units ? d.compute_units : 64;
}

// The workers asked for (0: the default), within one dispatch's workgroups on the device and
// VulkanExecutor::kMaxWorkers.
uint32_t checked_workers(const vk::DeviceTraits& d, uint32_t asked) {
  const uint32_t workers = asked ? asked : default_workers(d);
  const std::string refused = "vulkan executor: --workers " + std::to_string(workers) + " is more than ";
  if (workers > d.max_workgroups)
    throw Error(refused + "the " + std::to_string(d.max_workgroups) + " workgroups " + d.name +
                " allows in a dispatch (maxComputeWorkGroupCount[0])");
  if (workers > VulkanExecutor::kMaxWorkers)
    throw Error(refused + std::to_string(VulkanExecutor::kMaxWorkers) +
                ", the most the executor takes (the least maxComputeWorkGroupCount[0] Vulkan guarantees; more only "
                "queue behind those the device runs at once)");
  return workers;
}

// The task table the shader reads: each task with its view operands renumbered 0..7 and those
// views resolved to device addresses beside it (the CUDA kernel's StagedTask, with addresses).
std::vector<VulkanStagedTask> staged_tasks(const Graph& g, const std::vector<vk::Buffer>& arenas) {
  std::vector<VulkanStagedTask> staged(g.tasks.size());
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    VulkanStagedTask& s = staged[i];
    s.task = g.tasks[i];
    for_each_view_operand(g.tasks[i], [&](uint32_t k, uint32_t id) {
      const SpView& v = g.views[id];
      s.views[k] = VulkanView{arenas[v.arena].address() + sp_view_offset(v), v.rows, v.cols, v.row_stride, v.dtype};
      s.task.operand[k] = k;
    });
  }
  return staged;
}

// The params buffer: the graph params, then the op parameter records (tasks/op_params.h), which
// the shaders read by index past them (op_param in shaders/memory.glsl).
std::vector<uint32_t> params_words(const Graph& g) {
  static_assert(sizeof(SpGraphParams) % 16 == 0 && sizeof(SpOpParams) % 16 == 0, "records of whole 16-byte vectors");
  std::vector<uint32_t> words((sizeof(SpGraphParams) + g.op_params.size() * sizeof(SpOpParams)) / 4);
  std::memcpy(words.data(), &g.params, sizeof(SpGraphParams));
  if (!g.op_params.empty())
    std::memcpy(words.data() + sizeof(SpGraphParams) / 4, g.op_params.data(), g.op_params.size() * sizeof(SpOpParams));
  return words;
}

}  // namespace

struct VulkanExecutor::Device {
  vk::Context ctx;
  vk::Commands commands;
  std::vector<vk::Buffer> arenas;  // by arena id
  vk::Buffer tasks, params, counters, control, trace;
  vk::Buffer staging, trace_staging, upload_staging;
  std::unique_ptr<vk::ComputePipeline> pipeline;
  // The run staging buffer: state, control block and held claims, counters, logits.
  VkDeviceSize state_at = 0, control_at = 0, counters_at = 0, logits_at = 0, logits_offset = 0;
  uint32_t logits_arena = SP_ARENA_WORK;
  VkDeviceSize state_bytes = 0, control_bytes = 0, counters_bytes = 0, logits_bytes = 0;
  std::vector<uint32_t> per_step;  // signals each counter receives per step
  uint32_t budget = 0, spin_ticks = 0;
  // The shader clock: lavapipe's counts nanoseconds in 32 bits (wrapping every 4.3 s),
  // NVIDIA's in 64. Differences are taken in the clock's width.
  uint64_t clock_mask = ~uint64_t(0);
  double ticks_per_ns = 0;  // 0: the clock is of no use

  explicit Device(int32_t index) : ctx(index), commands(ctx) {}

  // Copies host bytes into dst, through a staging buffer of at most kUploadChunk.
  void fill(const vk::Buffer& dst, const void* src, size_t bytes) {
    const size_t chunk = std::min(bytes, kUploadChunk);
    if (upload_staging.bytes() < chunk) upload_staging = vk::Buffer(ctx, chunk, true, "the upload staging buffer");
    for (size_t at = 0; at < bytes; at += chunk) {
      const size_t n = std::min(chunk, bytes - at);
      std::memcpy(upload_staging.mapped(), static_cast<const uint8_t*>(src) + at, n);
      VkCommandBuffer cmd = commands.begin();
      vk::copy(cmd, upload_staging, 0, dst, at, n);
      vk::barrier(cmd);
      commands.submit_and_wait("an upload");
    }
  }

  template <class T>
  vk::Buffer upload(const std::vector<T>& v, const std::string& what) {
    vk::Buffer b(ctx, v.size() * sizeof(T), false, what);
    fill(b, v.data(), v.size() * sizeof(T));
    return b;
  }

  vk::Buffer zeroed(VkDeviceSize bytes, const std::string& what) {
    vk::Buffer b(ctx, bytes, false, what);
    VkCommandBuffer cmd = commands.begin();
    vkCmdFillBuffer(cmd, b.get(), 0, VK_WHOLE_SIZE, 0);
    vk::barrier(cmd);
    commands.submit_and_wait("clearing a buffer");
    return b;
  }

  // STATE (uploaded each run), WORK and KV zeroed, CONST the RoPE table, then the weights.
  void upload_arenas(const Graph& g, const ModelWeights& w) {
    for (uint32_t a = 0; a < g.arenas.size(); ++a) {
      const std::string what = "arena '" + g.arenas[a].name + "'";
      if (a >= SP_ARENA_WEIGHTS0) {
        arenas.emplace_back(ctx, g.arenas[a].bytes, false, what);
        fill(arenas.back(), w.arenas[a - SP_ARENA_WEIGHTS0].data, g.arenas[a].bytes);
      } else if (a == SP_ARENA_CONST) {
        const SpGraphParams& p = g.params;
        std::vector<bf16> rope(g.arenas[a].bytes / sizeof(bf16), 0);
        fill_rope_table(p.rope_theta, p.rotary_dim, p.context, rope.data());
        arenas.push_back(upload(rope, what));
      } else {
        arenas.push_back(zeroed(g.arenas[a].bytes, what));
      }
    }
    upload_staging = vk::Buffer();
  }

  // The tables the shader reads (after the arenas: the tasks hold their addresses), the
  // counters and the control block with `workers` held slots.
  void upload_graph(const Graph& g, uint32_t workers) {
    tasks = upload(staged_tasks(g, arenas), "the task table");
    params = upload(params_words(g), "the graph and op params");
    counters = zeroed(uint64_t(g.num_counters()) * 4, "the counters");
    control_bytes = sizeof(VulkanControl) + uint64_t(workers) * sizeof(VulkanHeld);
    control = zeroed(control_bytes, "the control block");
    upload_staging = vk::Buffer();
    per_step.assign(g.num_counters(), 0);
    for (const SpTask& t : g.tasks) ++per_step[t.signal_counter];
  }

  // The run staging buffer's layout: the STATE arena, the control block, counters, logits.
  void lay_out_staging(const Graph& g, VkDeviceSize state_arena_bytes) {
    const SpView& lv = g.views[g.io.logits];
    state_bytes = state_arena_bytes;
    counters_bytes = uint64_t(g.num_counters()) * 4;
    logits_bytes = uint64_t(lv.cols) * sizeof(float);
    logits_arena = lv.arena;
    logits_offset = sp_view_offset(lv);
    control_at = (state_bytes + 15) / 16 * 16;
    counters_at = control_at + control_bytes;
    logits_at = counters_at + counters_bytes;
    staging = vk::Buffer(ctx, logits_at + logits_bytes, true, "the run staging buffer");
  }

  VulkanControl read_control() const {
    VulkanControl c;
    std::memcpy(&c, staging.mapped() + control_at, sizeof c);
    return c;
  }

  // The shader clock now (a dispatch of one workgroup in the clock-probe mode).
  uint64_t read_clock() {
    VulkanPush push{};
    push.control = control.address();
    push.mode = kVkModeClockProbe;
    VkCommandBuffer cmd = commands.begin();
    pipeline->dispatch(cmd, &push, 1);
    vk::barrier(cmd);
    vk::copy(cmd, control, 0, staging, control_at, sizeof(VulkanControl));
    vk::barrier(cmd);
    commands.submit_and_wait("a clock probe");
    const VulkanControl c = read_control();
    return (uint64_t(c.clock_hi) << 32) | c.clock_lo;
  }

  // Ticks per nanosecond, from two probes 50 ms apart (after one that warms the pipeline up:
  // lavapipe compiles it at its first dispatch), each timed on the host when it completes.
  void calibrate_clock() {
    auto probe = [&](double& host_ns) {
      const uint64_t ticks = read_clock();
      host_ns = std::chrono::duration<double, std::nano>(Clock::now().time_since_epoch()).count();
      return ticks;
    };
    double h0 = 0, h1 = 0;
    probe(h0);
    const uint64_t c0 = probe(h0);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const uint64_t c1 = probe(h1);
    if (((c0 | c1) >> 32) == 0) clock_mask = 0xffffffffu;
    ticks_per_ns = h1 > h0 ? double((c1 - c0) & clock_mask) / (h1 - h0) : 0;
  }

  uint64_t ticks_to_ns(uint64_t ticks) const { return ticks_per_ns > 0 ? uint64_t(double(ticks) / ticks_per_ns) : 0; }
};

VulkanExecutor::VulkanExecutor(const Graph& g, const ModelWeights& w, const ExecutorOptions& opt)
    : Executor(g), opt_(opt) {
  const VulkanTuning& tuning = opt.vulkan;
  check_supported(g);
  dot_unroll_ = tuning.dot_unroll ? checked_unroll(tuning.dot_unroll, "a dot") : default_dot_unroll(g);
  if (opt.schedule != ScheduleKind::Ticket)
    throw Error("vulkan executor: tasks are claimed by ticket only (workgroups have no co-residency guarantee)");
  if (g.arenas.size() != SP_ARENA_WEIGHTS0 + w.arenas.size())
    throw Error("vulkan executor: the graph expects " + std::to_string(g.arenas.size() - SP_ARENA_WEIGHTS0) +
                " weight arenas but the model has " + std::to_string(w.arenas.size()));
  for (size_t i = 0; i < w.arenas.size(); ++i) {
    if (!w.arenas[i].data) throw Error("vulkan executor: weight arena '" + w.arenas[i].name + "' is not in host memory");
    if (g.arenas[SP_ARENA_WEIGHTS0 + i].bytes != w.arenas[i].bytes)
      throw Error("vulkan executor: weight arena '" + w.arenas[i].name + "' has " + std::to_string(w.arenas[i].bytes) +
                  " bytes but the graph was built for " + std::to_string(g.arenas[SP_ARENA_WEIGHTS0 + i].bytes));
  }

  dev_ = std::make_unique<Device>(opt.device);
  Device& d = *dev_;
  const vk::DeviceTraits& traits = d.ctx.traits();
  warps_ = tuning.warps ? tuning.warps : traits.lavapipe() ? 1 : 8;
  // On lavapipe a deeper attention unroll compiles slower (tiny: 19 s at 1, 25 at 4, 50 at 8)
  // and runs no faster (docs/vulkan.md, Knobs).
  attn_unroll_ = tuning.attn_unroll ? checked_unroll(tuning.attn_unroll, "an attention")
                                    : traits.lavapipe() ? 1 : 4;
  if (uint64_t(warps_) * kLanes > traits.max_workgroup_size)
    throw Error("vulkan executor: " + std::to_string(warps_) + " warps of 32 exceed the device's workgroup size of " +
                std::to_string(traits.max_workgroup_size));
  workers_ = checked_workers(traits, opt.workers);
  d.budget = tuning.budget ? tuning.budget : traits.lavapipe() ? kLavapipeBudget : kVkNoBudget;
  shuffle_width_ = shuffle_width(traits, tuning.shuffle_width);
  poll_by_load_ = tuning.poll == VulkanPoll::Device ? !traits.cpu : tuning.poll == VulkanPoll::Load;
  const uint32_t vecs = shared_vecs(g, warps_);
  // g_vecs, g_red, the warps' argmax partials, the staged task and params, the protocol's words
  // and the attention's arrival (shaders/).
  const uint64_t shared_bytes = uint64_t(vecs) * 16 + uint64_t(warps_) * (kLanes * 4 + 8) + sizeof(VulkanStagedTask) +
                                sizeof(SpGraphParams) + 20;
  if (shared_bytes > traits.max_shared_bytes)
    throw Error("vulkan executor: the graph's widest tile needs " + std::to_string(shared_bytes) +
                " bytes of shared memory; a workgroup on " + traits.name + " may have " +
                std::to_string(traits.max_shared_bytes));

  d.upload_arenas(g, w);
  d.upload_graph(g, workers_);
  d.lay_out_staging(g, state_arena_.size());
  logits_.resize(g.views[g.io.logits].cols);

  // The module that traces SM ids where the device can run it (its capability needs the extension).
  d.pipeline = std::make_unique<vk::ComputePipeline>(
      d.ctx, traits.sm_builtins ? shaders::persistent_sm_ids() : shaders::persistent(), uint32_t(sizeof(VulkanPush)),
      std::vector<uint32_t>{warps_ * kLanes, vecs, shuffle_width_, poll_by_load_ ? 1u : 0u, dot_unroll_, attn_unroll_,
                            graph_ops(g)});
  d.calibrate_clock();
  const double spin_ms = std::min(traits.lavapipe() ? kLavapipeLongestSpinMs : kLongestSpinMs, opt.watchdog_ms / 4.0);
  d.spin_ticks = uint32_t(std::clamp(spin_ms * 1e6 * d.ticks_per_ns, 0.0, double(UINT32_MAX)));
}

VulkanExecutor::~VulkanExecutor() = default;

std::string VulkanExecutor::describe() const {
  return "vulkan (" + std::to_string(workers_) + " workgroups x " + std::to_string(warps_ * kLanes) +
         " invocations, ticket, shuffle width " + std::to_string(shuffle_width_) + ", poll by " +
         (poll_by_load_ ? "load" : "atomic add") + ", dot unroll " + std::to_string(dot_unroll_) +
         ", attention unroll " + std::to_string(attn_unroll_) + ") on device " +
         std::to_string(dev_->ctx.device_index()) + ": " + dev_->ctx.traits().name;
}

std::span<const float> VulkanExecutor::logits() const { return logits_; }

std::vector<PipelineStatistic> VulkanExecutor::pipeline_statistics() const { return dev_->pipeline->statistics(); }

void VulkanExecutor::run_steps(uint32_t steps) {
  if (broken_) throw Error("vulkan executor: it stopped on an earlier failure; make a new one");
  if (state().temperature > 0.0f) throw Error("vulkan executor: only greedy sampling (temperature 0) is implemented");
  last_run_dispatches_ = 0;
  const uint32_t per_run = std::max(1u, kTicketLimit / uint32_t(graph_.tasks.size()));
  try {
    for (uint32_t done = 0; done < steps;) {
      const uint32_t n = std::min(per_run, steps - done);
      run_chunk(n);
      done += n;
    }
  } catch (...) {
    broken_ = true;  // the counters no longer match any whole number of steps
    throw;
  }
}

// Dispatches until every counter has its signals for the chunk's steps.
void VulkanExecutor::run_chunk(uint32_t steps) {
  Device& d = *dev_;
  const uint32_t n = uint32_t(graph_.tasks.size());
  const VkDeviceSize trace_bytes = uint64_t(steps) * n * sizeof(VulkanTraceRecord);
  if (tracing_ && d.trace.bytes() < trace_bytes) {
    d.trace = vk::Buffer(d.ctx, trace_bytes, false, "the trace");
    d.trace_staging = vk::Buffer(d.ctx, trace_bytes, true, "the trace staging buffer");
  }
  // The trace's times count from the run's start on the host clock and on the shader clock.
  const auto run_start = Clock::now();
  const uint64_t run_clock = tracing_ ? d.read_clock() : 0;
  if (tracing_ && !trace_epoch_) trace_epoch_ = run_start;
  VulkanPush push{d.tasks.address(), d.params.address(), d.arenas[SP_ARENA_STATE].address(),
                  d.counters.address(), d.control.address(), tracing_ ? d.trace.address() : 0,
                  n, steps * n, steps_done_, d.budget, kVkModeRun, d.spin_ticks};
  uint8_t* staging = d.staging.mapped();
  std::memcpy(staging, state_arena_.data(), d.state_bytes);
  std::memset(staging + d.control_at, 0, d.control_bytes);

  std::vector<uint32_t> target(d.per_step.size()), seen(d.per_step.size());
  for (size_t c = 0; c < target.size(); ++c) target[c] = d.per_step[c] * (steps_done_ + steps);
  auto last_progress = Clock::now();
  VkCommandBuffer cmd = d.commands.begin();
  if (clear_recurrent_) vkCmdFillBuffer(cmd, d.arenas[SP_ARENA_RECURRENT].get(), 0, VK_WHOLE_SIZE, 0);
  clear_recurrent_ = false;
  vk::copy(cmd, d.staging, 0, d.arenas[SP_ARENA_STATE], 0, d.state_bytes);
  vk::copy(cmd, d.staging, d.control_at, d.control, 0, d.control_bytes);
  vk::barrier(cmd);
  for (;;) {
    d.pipeline->dispatch(cmd, &push, workers_);
    ++last_run_dispatches_;
    vk::barrier(cmd);
    vk::copy(cmd, d.arenas[SP_ARENA_STATE], 0, d.staging, 0, d.state_bytes);
    vk::copy(cmd, d.control, 0, d.staging, d.control_at, d.control_bytes);
    vk::copy(cmd, d.counters, 0, d.staging, d.counters_at, d.counters_bytes);
    vk::copy(cmd, d.arenas[d.logits_arena], d.logits_offset, d.staging, d.logits_at, d.logits_bytes);
    vk::barrier(cmd);
    d.commands.submit_and_wait("a dispatch of the persistent shader");

    const VulkanControl control = d.read_control();
    if (control.failure_kind != kVkFailNone) throw Error(vk::failure_message(control, graph_));
    if (control.loop_limit_hit)
      throw Error("vulkan executor: a dispatch ran past the device's loop limit (lavapipe stops an invocation's loops "
                  "after 65,535 iterations), so its results cannot be trusted; give it a smaller budget "
                  "(now " + std::to_string(d.budget) + ")");
    const auto* counters = reinterpret_cast<const uint32_t*>(staging + d.counters_at);
    bool done = true;
    for (size_t c = 0; c < target.size(); ++c) done = done && sp_counter_reached(counters[c], target[c]);
    if (done) break;
    if (!std::equal(seen.begin(), seen.end(), counters)) {
      std::copy(counters, counters + seen.size(), seen.begin());
      last_progress = Clock::now();
    } else if (Clock::now() - last_progress > std::chrono::milliseconds(opt_.watchdog_ms)) {
      // The earliest task still waiting is the one the others wait behind.
      const auto* held = reinterpret_cast<const VulkanHeld*>(staging + d.control_at + sizeof(VulkanControl));
      const VulkanHeld* first = nullptr;
      for (uint32_t w = 0; w < workers_; ++w)
        if (held[w].ticket_plus_one && (!first || held[w].ticket_plus_one < first->ticket_plus_one)) first = &held[w];
      if (!first)
        throw Error("vulkan executor watchdog: no task finished for " + std::to_string(opt_.watchdog_ms) + " ms");
      const uint32_t ticket = first->ticket_plus_one - 1;
      throw Error(vk::watchdog_message(graph_, ticket % n, steps_done_ + ticket / n, first->value, opt_.watchdog_ms));
    }
    cmd = d.commands.begin();
  }
  std::memcpy(state_arena_.data(), staging, d.state_bytes);
  std::memcpy(logits_.data(), staging + d.logits_at, d.logits_bytes);
  if (tracing_) read_trace(steps, uint64_t(std::chrono::nanoseconds(run_start - *trace_epoch_).count()), run_clock);
  steps_done_ += steps;
}

void VulkanExecutor::read_trace(uint32_t steps, uint64_t run_ns, uint64_t run_clock) {
  Device& d = *dev_;
  const size_t records = size_t(steps) * graph_.tasks.size();
  VkCommandBuffer cmd = d.commands.begin();
  vk::copy(cmd, d.trace, 0, d.trace_staging, 0, records * sizeof(VulkanTraceRecord));
  vk::barrier(cmd);
  d.commands.submit_and_wait("reading the trace");
  const auto* r = reinterpret_cast<const VulkanTraceRecord*>(d.trace_staging.mapped());
  auto at = [&](uint64_t ticks) { return run_ns + d.ticks_to_ns((ticks - run_clock) & d.clock_mask); };
  for (size_t i = 0; i < records; ++i)
    trace_.push_back({r[i].step, r[i].task, r[i].worker, at(r[i].start), at(r[i].end),
                      d.ticks_to_ns(r[i].wait & d.clock_mask), r[i].sm});
}

std::unique_ptr<Executor> make_vulkan_executor(const Graph& g, const ModelWeights& w, const ExecutorOptions& opt) {
  return std::make_unique<VulkanExecutor>(g, w, opt);
}

}  // namespace spindle

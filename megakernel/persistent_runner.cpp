// The persistent megakernel (megakernel.h): one launch runs many steps, its blocks taking tasks
// by ticket or by static list and waiting on counters.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "host/schedule.h"
#include "megakernel/cuda_check.h"
#include "megakernel/cuda_runner.h"
#include "megakernel/l2_prefetch.h"
#include "megakernel/megakernel.h"
#include "megakernel/per_op.h"
#include "megakernel/persistent_build.h"
#include "megakernel/repack_down.h"
#include "megakernel/task_copies.h"
#include "tasks/counters.h"
#include "tasks/error.h"
#include "tasks/gang.h"
#include "tasks/op_decls.h"

namespace spindle::cuda {
namespace {

// The most tasks a stage holding a gang has (0: no gangs). Its gangs' members can run at once
// when every one of them gets a block of its own: `blocks` at least that many.
uint32_t largest_gang_stage(const std::vector<Stage>& stages, const Graph& g) {
  uint32_t most = 0;
  for (const Stage& st : stages)
    for (uint32_t i = st.first_task; i < st.first_task + st.tasks; ++i)
      if (sp_gang_width(g.tasks[i]) > 1) most = std::max(most, st.tasks);
  return most;
}

// The dynamic shared memory the tasks' weight copies (task_copies.h) ask of a launch: each lies
// at its `at`, above its tile's (0: no task has one).
size_t copies_smem(const Graph& g, const CopyLimits& limits) {
  size_t smem = 0;
  for (const SpTask& t : g.tasks) {
    const TaskCopy c = task_copy(g, t, limits);
    if (c.bytes) smem = std::max<size_t>(smem, c.at + c.bytes);
  }
  return smem;
}

// The L2 prefetch budget a stage, kL2PrefetchAuto resolved for g's model.
uint64_t l2_prefetch_bytes(const Graph& g, const MegakernelTuning& tuning) {
  return tuning.l2_prefetch_bytes == kL2PrefetchAuto ? l2_prefetch_auto_bytes(g.params.hidden)
                                                     : tuning.l2_prefetch_bytes;
}

// Each task's record with its view operands resolved (StagedTask); slots that hold no view keep
// their word and a zeroed view.
std::vector<StagedTask> staged_tasks(const Graph& g, const std::vector<Stage>& stages, const MegakernelTuning& tuning,
                                     const CopyLimits& copies) {
  const std::vector<L2Prefetch> prefetch =
      plan_l2_prefetch(g, stages, tuning.l2_prefetch_distance, l2_prefetch_bytes(g, tuning));
  std::vector<StagedTask> staged(g.tasks.size());
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    StagedTask& s = staged[i];
    s.t = g.tasks[i];
    s.prefetch = prefetch[i];
    s.copy = task_copy(g, g.tasks[i], copies);
    for_each_view_operand(g.tasks[i], [&](uint32_t k, uint32_t v) {
      s.views[k] = g.views[v];
      s.t.operand[k] = k;
    });
    const OpcodeOperands ops = opcode_operands(s.t.op);
    for (uint32_t k = 0; k < SP_TASK_OPERANDS; ++k)
      if (ops.operand[k].kind == OperandKind::Params) {  // one at most (tests/tasks_op_decls.cpp)
        s.params = g.op_params[s.t.operand[k]];
        s.t.operand[k] = 0;
      }
    if (s.t.op == SP_OP_MLP) s.views[2].row_stride = kPieceMajorStride;  // repack_down_weights
  }
  return staged;
}

class PersistentRunner final : public Runner {
 public:
  PersistentRunner(const Graph& g, const ExecutorOptions& opt, SharedDevice& d, const LaunchLimits& limits)
      : g_(g), opt_(opt), d_(d) {
    const MegakernelTuning& tuning = opt.megakernel;
    const std::vector<Stage> stages = graph_stages(g);
    build_ = persistent_build(g);
    gang_stage_ = largest_gang_stage(stages, g);
    if (tuning.blocks_per_sm != 1 && tuning.blocks_per_sm != 2)
      throw Error("cuda executor: blocks_per_sm is 1 or 2, not " + std::to_string(tuning.blocks_per_sm));
    if (build_ != TileBuild::kPlain && tuning.blocks_per_sm != 1)
      throw Error(std::string("cuda executor: the megakernel's ") + tile_build_name(build_) +
                  " build (the graph's ops need it) runs 1 block an SM, not " + std::to_string(tuning.blocks_per_sm));
    const size_t static_smem = megakernel_static_smem(tuning.blocks_per_sm, build_);
    const size_t dynamic_limit = limits.smem_limit - static_smem;
    if (limits.tile_smem > dynamic_limit)
      throw Error("cuda executor: the graph's largest tile needs " + std::to_string(limits.tile_smem) +
                  " bytes of shared memory beside the persistent kernel's " + std::to_string(static_smem) +
                  "; a block may have " + std::to_string(limits.smem_limit) +
                  " in all; lower --tune cuda-attn-kv-kb or cuda-attn-score-kb");
    // Sized for every copy an MLP member may get; whether it gets one (only when it runs at once
    // with its gang) is known once the grid is.
    const CopyLimits copies{tuning.weight_preload_bytes, dynamic_limit, true};
    preload_smem_ = copies_smem(g, copies);
    smem_ = std::max(limits.tile_smem, preload_smem_);
    const uint32_t per_sm = megakernel_blocks_per_sm(tuning.blocks_per_sm, build_, smem_);
    if (per_sm == 0) throw Error("cuda executor: the persistent kernel does not fit on an SM");
    if (per_sm < tuning.blocks_per_sm)
      throw Error("cuda executor: " + std::to_string(tuning.blocks_per_sm) + " blocks do not fit on an SM with " +
                  std::to_string(smem_) + " bytes of shared memory each (the largest tile's and the weight "
                  "preload's); lower --tune cuda-attn-kv-kb, cuda-attn-score-kb or cuda-preload-kb");
    const uint32_t resident = per_sm * limits.sms;
    blocks_ = std::min(opt.workers ? opt.workers : tuning.blocks_per_sm * limits.sms, resident);
    gangs_at_once_ = gang_stage_ > 0 && blocks_ >= gang_stage_;
    staged_ = upload(staged_tasks(g, stages, tuning, {copies.projection_bytes, dynamic_limit, gangs_at_once_}),
                     "the staged task table");
    progress_ = zeroed(size_t(blocks_) * 4 * sizeof(uint32_t), "the blocks' progress");
    DeviceTables tables;
    tables.staged = staged_.as<const StagedTask>();
    if (opt.schedule == ScheduleKind::Static) {
      std::vector<uint32_t> begin{0}, tasks;
      for (const std::vector<uint32_t>& list : static_lists(device_tasks(g, 0), blocks_)) {
        for (size_t i = 0; i < list.size(); ++i) {
          const SpTask& t = g.tasks[list[i]];
          const bool same = i + 1 < list.size() && g.tasks[list[i + 1]].signal_counter == t.signal_counter &&
                            g.tasks[list[i + 1]].wait_counter != t.signal_counter;
          tasks.push_back(list[i] | (same ? kListSameSignal : 0u));
        }
        begin.push_back(uint32_t(tasks.size()));
      }
      list_begin_ = upload(begin, "the static schedule");
      list_tasks_ = upload(tasks, "the static schedule");
      tables.list_begin = list_begin_.as<const uint32_t>();
      tables.list_tasks = list_tasks_.as<const uint32_t>();
    } else {
      std::vector<uint32_t> first;
      for (const Stage& st : op_runs(g, stages)) first.push_back(st.first_task);
      tables.n_stages = uint32_t(first.size());
      first.push_back(uint32_t(g.tasks.size()));
      stage_first_ = upload(first, "the stage table");
      tables.stage_first = stage_first_.as<const uint32_t>();
    }
    if (gangs_at_once_) tables.gang_counters = d.counters.as<uint32_t>() + g.num_counters();
    graph_ = device_graph(g, d, limits, tables);
  }

  void launch(const RunSteps& run) override {
    const MegakernelTuning& tuning = opt_.megakernel;
    const uint32_t per_launch = opt_.steps_per_launch ? opt_.steps_per_launch : run.steps;
    const size_t claims_bytes = size_t(std::min(per_launch, run.steps)) * graph_.n_stages * sizeof(uint32_t);
    if (stage_claims_.bytes() < claims_bytes) stage_claims_ = DeviceBuffer(claims_bytes, "the stage claims");
    for (uint32_t done = 0; done < run.steps; done += per_launch) {
      MegakernelLaunch launch{};
      launch.first_step = run.first_step + done;
      launch.first_position = run.first_position + done;
      launch.steps = std::min(per_launch, run.steps - done);
      launch.stage_claims = stage_claims_.as<uint32_t>();
      if (launch.stage_claims)
        SP_CUDA(cudaMemsetAsync(launch.stage_claims, 0, size_t(launch.steps) * graph_.n_stages * sizeof(uint32_t),
                                d_.stream.get()));
      launch.backoff.watchdog_ns = uint64_t(opt_.watchdog_ms) * 1000000u;
      launch.input_cache = tuning.input_cache;
      launch.merge_release = tuning.merge_release;
      launch.backoff.first_sleep_ns = tuning.first_sleep_ns;
      launch.backoff.max_sleep_ns = std::max(tuning.first_sleep_ns, tuning.max_sleep_ns);
      launch.preload_bytes = tuning.weight_preload_bytes;
      launch.smem_bytes = uint32_t(smem_);
      launch_megakernel(graph_, tuning.blocks_per_sm, build_, blocks_, smem_, launch, d_.stream.get());
    }
  }

  std::string describe() const override {
    const MegakernelTuning& t = opt_.megakernel;
    std::string knobs;
    if (t.blocks_per_sm != 1) knobs += ", " + std::to_string(t.blocks_per_sm) + " blocks/SM";
    if (!t.input_cache) knobs += ", no input cache";
    if (!t.merge_release) knobs += ", release per task";
    const MegakernelTuning defaults;
    if (t.first_sleep_ns != defaults.first_sleep_ns || t.max_sleep_ns != defaults.max_sleep_ns)
      knobs += ", sleep " + std::to_string(t.first_sleep_ns) + "-" + std::to_string(t.max_sleep_ns) + " ns";
    if (!t.weight_preload_bytes) knobs += ", no weight preload";
    else if (!preload_smem_) knobs += ", no task's weights within the " + std::to_string(t.weight_preload_bytes) + "-byte preload";
    else knobs += ", weights preloaded up to " + std::to_string(t.weight_preload_bytes) + " bytes";
    const uint64_t prefetch = l2_prefetch_bytes(g_, t);
    if (t.l2_prefetch_distance && prefetch)
      knobs += ", L2 prefetch " + (prefetch % (1u << 20) ? std::to_string(prefetch >> 10) + " KiB"
                                                          : std::to_string(prefetch >> 20) + " MiB") +
               " a stage at distance " + std::to_string(t.l2_prefetch_distance);
    if (build_ != TileBuild::kPlain) knobs += std::string(", ") + tile_build_name(build_) + " build";
    if (gang_stage_)
      knobs += gangs_at_once_ ? ", gangs' members at once" : ", gangs whole (fewer blocks than a gang stage's tasks)";
    return "cuda megakernel (" + std::to_string(blocks_) + " blocks x " + std::to_string(kBlockThreads) +
           " threads, " + schedule_kind_name(opt_.schedule) + knobs + ")";
  }

  size_t trace_records(uint32_t steps) const override { return size_t(steps) * g_.tasks.size(); }
  uint32_t* progress() const override { return progress_.as<uint32_t>(); }
  uint32_t workers() const override { return blocks_; }

  // Where the blocks were (the earliest tasks they waited on or ran, with their counters), so
  // that a stall can be traced to its cause.
  std::string blocks_report() const override {
    std::vector<uint32_t> progress(size_t(blocks_) * 4), counters(g_.num_counters());
    if (cudaMemcpy(progress.data(), progress_.data(), progress.size() * 4, cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(counters.data(), d_.counters.data(), counters.size() * 4, cudaMemcpyDeviceToHost) != cudaSuccess)
      return "";
    uint32_t phases[5] = {};
    std::vector<uint32_t> order;
    for (uint32_t b = 0; b < blocks_; ++b) {
      ++phases[std::min<uint32_t>(progress[4 * b + 2], 4)];
      if (progress[4 * b + 2] != 0) order.push_back(b);
    }
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      return std::pair(progress[4 * a + 1], progress[4 * a]) < std::pair(progress[4 * b + 1], progress[4 * b]);
    });
    std::string out = "; blocks: " + std::to_string(phases[1]) + " waiting, " + std::to_string(phases[2]) +
                      " running, " + std::to_string(phases[3]) + " past a task, " + std::to_string(phases[0]) +
                      " not started; earliest:";
    for (size_t i = 0; i < order.size() && i < 6; ++i) {
      const uint32_t b = order[i], task = progress[4 * b], step = progress[4 * b + 1], phase = progress[4 * b + 2];
      if (task >= g_.tasks.size()) continue;
      const SpTask& t = g_.tasks[task];
      const char* op = sp_opcode_name(t.op);
      out += " [block " + std::to_string(b) + " " + (phase == 1 ? "waits for" : phase == 2 ? "runs" : "ran") +
             " task " + std::to_string(task) + " (" + (op ? op : "?") + ") step " + std::to_string(step);
      if (t.wait_counter < counters.size())
        out += ", " + g_.counter_names[t.wait_counter] + " = " + std::to_string(counters[t.wait_counter]) + "/" +
               std::to_string(sp_wait_target(t, step));
      if (t.signal_counter < counters.size())
        out += ", signals " + g_.counter_names[t.signal_counter] + " = " + std::to_string(counters[t.signal_counter]);
      out += "]";
    }
    return out;
  }

 private:
  const Graph& g_;
  const ExecutorOptions opt_;
  SharedDevice& d_;
  uint32_t blocks_ = 0;
  size_t smem_ = 0;             // the launch's dynamic shared memory a block
  TileBuild build_ = TileBuild::kPlain;  // the build the graph needs (persistent_build.h)
  uint32_t gang_stage_ = 0;     // tasks of the graph's largest stage holding a gang (0: no gangs)
  bool gangs_at_once_ = false;  // its gangs' members run at once, each in its block (tasks/gang.h)
  size_t preload_smem_ = 0;     // the dynamic shared memory the weight preloads need; 0: no task qualifies
  DeviceBuffer staged_, progress_, list_begin_, list_tasks_, stage_first_, stage_claims_;
  DeviceGraph graph_{};
};

}  // namespace

std::unique_ptr<Runner> make_persistent_runner(const Graph& g, const ExecutorOptions& opt, SharedDevice& d,
                                               const LaunchLimits& limits) {
  return std::make_unique<PersistentRunner>(g, opt, d, limits);
}

}  // namespace spindle::cuda

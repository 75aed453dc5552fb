// A first look at speed, skipped by default (run with -tc='timing*' --no-skip): device ms per
// token of each CUDA mode and megakernel tuning on real shapes, against the floor of reading
// every weight once at the measured copy bandwidth, and where a megakernel token's time goes
// by opcode (from its trace). `spindle bench` is the real instrument; this is a smoke check
// that every variant runs at size and agrees on the tokens. Needs a GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "host/decode.h"
#include "host/graph_builder.h"
#include "host/model_weights.h"
#include "megakernel/cuda_executor.h"
#include "tasks/error.h"

using namespace spindle;

namespace {

struct Variant {
  const char* name;
  CudaMode mode;
  ScheduleKind schedule;
  MegakernelTuning tuning;
};

MegakernelTuning with(auto&& f) {
  MegakernelTuning t;
  f(t);
  return t;
}

const std::vector<Variant>& variants() {
  static const std::vector<Variant> v = {
      {"megakernel static", CudaMode::Megakernel, ScheduleKind::Static, {}},
      {"megakernel ticket", CudaMode::Megakernel, ScheduleKind::Ticket, {}},
      {"per-op", CudaMode::PerOp, ScheduleKind::Ticket, {}},
      {"cuda graph", CudaMode::Graph, ScheduleKind::Ticket, {}},
  };
  return v;
}

ExecutorOptions options(const Variant& v) {
  ExecutorOptions o;
  o.kind = ExecutorKind::Cuda;
  o.cuda_mode = v.mode;
  o.schedule = v.schedule;
  o.watchdog_ms = 5000;  // a stall costs seconds, and its report names where the blocks were
  o.megakernel = v.tuning;
  return o;
}

// Weight bytes a task reads.
uint64_t weight_bytes(const Graph& g, const SpTask& t) {
  const uint64_t row = uint64_t(g.views[t.operand[0]].cols) * 2;
  if (t.op == SP_OP_GEMV) return (t.tile_end - t.tile_begin) * row;
  if (t.op == SP_OP_GATE_UP) return 2 * (t.tile_end - t.tile_begin) * row;
  return 0;
}

// Per opcode: tasks, mean run and wait time, and the weight bandwidth of one task while it
// runs; then the busy fraction of the blocks over the traced steps.
void trace_summary(const std::string& model, const Graph& g, const ModelWeights& w) {
  ExecutorOptions o = options(variants()[0]);
  o.schedule = ScheduleKind::Ticket;  // the default schedule (static lists can stall: docs/journal/sessions-01-61.md)
  CudaExecutor ex(g, w, o);
  try {
    decode(ex, g, {1, 2}, 4, {});
    ex.set_tracing(true);
    decode(ex, g, {1, 2}, 4, {});
  } catch (const Error& e) {
    FAIL_CHECK(model << " trace: " << e.what());
    return;
  }
  struct Sum {
    uint64_t tasks = 0, run_ns = 0, wait_ns = 0, bytes = 0;
  };
  std::map<std::string, Sum> by_op;
  uint64_t first = ~uint64_t(0), last = 0, busy = 0;
  for (const TaskTrace& t : ex.trace()) {
    const SpTask& task = g.tasks[t.task];
    Sum& s = by_op[sp_opcode_name(task.op)];
    ++s.tasks;
    s.run_ns += t.end_ns - t.start_ns;
    s.wait_ns += t.wait_ns;
    s.bytes += weight_bytes(g, task);
    first = std::min(first, t.start_ns);
    last = std::max(last, t.end_ns);
    busy += t.end_ns - t.start_ns;
  }
  for (const auto& [op, s] : by_op)
    MESSAGE(model << " trace " << op << ": " << s.tasks << " tasks, " << double(s.run_ns) / s.tasks / 1e3
                  << " us run, " << double(s.wait_ns) / s.tasks / 1e3 << " us wait"
                  << (s.bytes ? ", " + std::to_string(double(s.bytes) / double(s.run_ns)) + " GB/s per task" : ""));
  MESSAGE(model << " trace: blocks busy " << double(busy) / (double(last - first) * ex.workers()) * 100
                << "% of " << (last - first) / 1e3 << " us");
}

// Device ms per token of each variant on `model`, for each stage_tasks choice of the graph
// builder (every variant at the first, the static megakernel and the CUDA graph at the
// others), measured twice to show the spread.
void time_variants(const std::string& model, uint32_t context, std::initializer_list<uint32_t> stage_tasks) {
  const double gbs = measure_copy_bandwidth_gbs(size_t(4) << 30);
  LoadOptions lo;
  lo.fill_host = false;  // the CUDA executor generates synthetic weights on the device
  const ModelWeights w = load_model(model, lo);
  const double floor_ms = double(w.total_bytes()) / (gbs * 1e9) * 1e3;
  MESSAGE(model << ": " << w.total_bytes() << " weight bytes; copy bandwidth " << gbs << " GB/s; floor " << floor_ms
                << " ms/token");
  constexpr uint32_t kTokens = 64;
  std::vector<uint32_t> first_tokens;
  for (uint32_t tasks : stage_tasks) {
    const bool first = tasks == *stage_tasks.begin();
    BuildOptions b;
    b.context = context;
    b.stage_tasks = tasks;
    const Graph g = build_decode_graph(w, b);
    if (first) trace_summary(model, g, w);
    for (const Variant& v : variants()) {
      if (!first && v.name != std::string("megakernel static") && v.name != std::string("cuda graph")) continue;
      CudaExecutor ex(g, w, options(v));
      double ms[2];
      std::vector<uint32_t> tokens;
      try {
        decode(ex, g, {1, 2}, 8, {});  // warm-up
        for (double& m : ms) {
          tokens = decode(ex, g, {1, 2}, kTokens, {}).tokens;
          m = ex.last_run_device_ms() / kTokens;
        }
      } catch (const Error& e) {
        FAIL_CHECK(model << " stage tasks " << tasks << " " << std::string(v.name) << ": " << e.what());
        continue;
      }
      MESSAGE(model << " stage tasks " << tasks << " (" << g.tasks.size() << " tasks) " << std::string(v.name) << ": "
                    << ms[0] << ", " << ms[1] << " ms/token, " << floor_ms / ms[0] * 100 << "% of the floor ["
                    << ex.describe() << "]");
      if (first_tokens.empty()) first_tokens = tokens;
      CHECK(tokens == first_tokens);
    }
  }
}

}  // namespace

TEST_CASE("timing: ms per token of each CUDA mode and megakernel tuning" * doctest::skip()) {
  time_variants("synthetic:qwen3-0.6b", 4096, {kDefaultStageTasks, 2 * kDefaultStageTasks});
  time_variants("synthetic:qwen3-8b", 4096, {kDefaultStageTasks, 2 * kDefaultStageTasks});
}

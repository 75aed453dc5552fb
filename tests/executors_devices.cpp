// A step split over several devices (docs/multi-device.md), simulated by the CPU executors: for
// every family, N devices give the bits of the one-device graph whose o_proj and down dots are
// split N ways; each device runs its own share; a missing exchange shows in the bits; and the
// graphs and executors that cannot serve the split refuse it, saying why.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "executors_fixture.h"
#include "hand_built_models.h"
#include "host/synthetic.h"
#include "tasks/graph_file.h"
#include "tests/split_graphs.h"
#include "tasks/weight_shard.h"

using namespace spindle;

namespace {

const std::vector<uint32_t> kPrompt = {3, 17, 250, 9};
constexpr uint32_t kNewTokens = 6;

// The tiny preset of a family with 8 q heads over 4 kv heads and, in the hybrid ones, 8 GDN
// value heads over 4 key heads, so that 2 and 4 devices each hold whole kv and key heads.
ModelConfig four_kv_config(const std::string& preset) {
  ModelConfig c = synthetic_config(preset);
  c.n_heads = 8;
  c.n_kv_heads = 4;
  if (c.linear_num_key_heads) {
    c.linear_num_key_heads = 4;
    c.linear_num_value_heads = 8;
  }
  return c;
}

ModelWeights four_kv_heads(const std::string& preset) { return test::weights_for(preset + "-4kv", four_kv_config(preset), 256); }

// The same with 2 kv heads (4 q heads each): over 4 devices each kv head's q heads are shared by 2.
ModelWeights two_kv_heads(const std::string& preset) {
  ModelConfig c = four_kv_config(preset);
  c.n_kv_heads = 2;
  return test::weights_for(preset + "-2kv", c, 256);
}

BuildOptions over(uint32_t devices) {
  BuildOptions o;
  o.context = 32;
  o.devices = devices;
  return o;
}

// The one-device graph with o_proj's and down's dots split into N pieces: what N devices compute.
Graph one_device_split(const ModelWeights& w, uint32_t devices) {
  BuildOptions o = over(1);
  o.o_proj_split = o.down_split = o.gdn_out_split = o.expert_down_split = {devices, devices};
  return build_decode_graph(w, o);
}

ExecutorOptions threaded(uint32_t workers, ScheduleKind schedule) {
  ExecutorOptions o;
  o.kind = ExecutorKind::Threaded;
  o.workers = workers;
  o.schedule = schedule;
  return o;
}

// g on the sequential executor and the threaded one (1 and 3 workers a device, both schedules)
// decodes `expect`'s tokens and logits.
void check_simulations(const Graph& g, const ModelWeights& w, const Decoded& expect) {
  check_same(run_decode(g, w, {ExecutorKind::Sequential}, kPrompt, kNewTokens), expect);
  for (ScheduleKind schedule : {ScheduleKind::Ticket, ScheduleKind::Static})
    for (uint32_t workers : {1u, 3u}) {
      CAPTURE(std::string(schedule_kind_name(schedule)));
      CAPTURE(workers);
      check_same(run_decode(g, w, threaded(workers, schedule), kPrompt, kNewTokens), expect);
    }
}

// What N devices compute expert parallel: the one-device split graph with the routed experts'
// down dots whole and the shared expert's split.
Graph one_device_expert_parallel(const ModelWeights& w, uint32_t devices) {
  BuildOptions o = over(1);
  o.o_proj_split = o.down_split = o.gdn_out_split = {devices, devices};
  if (has_shared_expert(w.config.family)) o.shared_down_split = {devices, devices};
  return build_decode_graph(w, o);
}

BuildOptions expert_parallel(uint32_t devices) {
  BuildOptions o = over(devices);
  o.expert_parallel = true;
  return o;
}

const std::vector<std::string> kMoePresets = {"tiny-moe", "tiny-qwen3.5-moe", "tiny-qwen3-next"};

}  // namespace

TEST_CASE("devices: every family over 2 and 4 devices decodes the one-device split graph's tokens and logits, bit for bit") {
  for (const std::string preset : {"tiny", "tiny-moe", "tiny-qwen3.5", "tiny-qwen3.5-moe", "tiny-qwen3-next"}) {
    const ModelWeights w = four_kv_heads(preset);
    for (uint32_t devices : {2u, 4u}) {
      CAPTURE(preset);
      CAPTURE(devices);
      const Decoded expect = run_decode(one_device_split(w, devices), w, {ExecutorKind::Sequential}, kPrompt, kNewTokens);
      const Graph g = build_decode_graph(w, over(devices));
      check_simulations(g, w, expect);
    }
  }
}

TEST_CASE("devices: over more devices than kv heads, each kv head's q heads shared by devices that each compute and "
          "append its k and v rows, every family decodes the one-device split graph's tokens and logits") {
  for (const std::string preset : {"tiny", "tiny-moe", "tiny-qwen3.5", "tiny-qwen3.5-moe", "tiny-qwen3-next"}) {
    const ModelWeights w = two_kv_heads(preset);
    for (uint32_t devices : preset == "tiny" ? std::vector<uint32_t>{4, 8} : std::vector<uint32_t>{4}) {
      CAPTURE(preset);
      CAPTURE(devices);
      const uint32_t share = devices / 2;
      const Graph g = build_decode_graph(w, over(devices));
      CHECK(g.params.attn_kv_share == share);
      // Each attention unit (kv head, q-head split) on the device of its q heads: kv head k's
      // splits over devices k·share .. k·share + share − 1, in order.
      const uint32_t splits = g.params.attn_q_splits, chunks = g.params.attn_chunks;
      REQUIRE(splits % share == 0);
      size_t attention = 0;
      for (size_t i = 0; i < g.tasks.size(); ++i) {
        const SpTask& t = g.tasks[i];
        if (t.op != SP_OP_ATTENTION && t.op != SP_OP_GATED_ATTENTION) continue;
        const uint32_t unit = t.tile_begin / chunks;
        CHECK(g.task_device[i] == unit / splits * share + unit % splits / (splits / share));
        ++attention;
      }
      CHECK(attention > 0);
      const Decoded expect = run_decode(one_device_split(w, devices), w, {ExecutorKind::Sequential}, kPrompt, kNewTokens);
      check_simulations(g, w, expect);
    }
  }
}

TEST_CASE("devices: the MoE families expert parallel over 2 and 4 devices decode the one-device graph's tokens and "
          "logits (the routed experts' down dots whole, the shared expert's split), bit for bit") {
  for (const std::string& preset : kMoePresets) {
    const ModelWeights w = four_kv_heads(preset);
    for (uint32_t devices : {2u, 4u}) {
      CAPTURE(preset);
      CAPTURE(devices);
      const Decoded expect =
          run_decode(one_device_expert_parallel(w, devices), w, {ExecutorKind::Sequential}, kPrompt, kNewTokens);
      const Graph g = build_decode_graph(w, expert_parallel(devices));
      check_simulations(g, w, expect);
    }
  }
}

TEST_CASE("devices: the shared expert's down split apart from the routed experts' (shared_down_split) runs alike on "
          "the CPU executors, and a model without a shared expert refuses it") {
  for (const std::string preset : {"tiny-qwen3.5-moe", "tiny-qwen3-next"}) {
    const ModelWeights w = four_kv_heads(preset);
    // The splits and the sum's shared operand: pieces, whole rows, pieces of their own split.
    struct Case {
      test::DownSplits splits;
      uint32_t dtype;
    };
    for (const Case& c : {Case{{{}, {2, 2}}, SP_F32}, Case{{{2, 2}, {1, 0}}, SP_BF16}, Case{{{2, 2}, {4, 2}}, SP_F32}}) {
      CAPTURE(preset);
      CAPTURE(c.splits.routed.pieces);
      CAPTURE(c.splits.shared.pieces);
      BuildOptions o = over(1);
      o.expert_down_split = c.splits.routed;
      o.shared_down_split = c.splits.shared;
      const Graph g = build_decode_graph(w, o);
      const SpTask& sum = g.tasks[first_task(g, SP_OP_EXPERT_DOWN_SUM)];
      CHECK(g.views[sum.operand[5]].dtype == c.dtype);
      if (c.dtype == SP_F32) CHECK(g.views[sum.operand[5]].rows == c.splits.shared.pieces);
      check_simulations(g, w, run_decode(g, w, {ExecutorKind::Sequential}, kPrompt, kNewTokens));
    }
  }
  BuildOptions o = over(1);
  o.shared_down_split = {2, 2};
  CHECK(error_of([&] { build_decode_graph(four_kv_heads("tiny-moe"), o); }) ==
        "a shared expert down split, and a qwen3_moe model has no shared expert");
  o.shared_down_split = {3, 3};
  CHECK(error_of([&] { build_decode_graph(four_kv_heads("tiny-qwen3.5-moe"), o); }) ==
        "shared expert down split 3/3: the split's pieces do not divide the row length (32 columns)");
}

TEST_CASE("devices: a split GEMV's stages rewritten as PIECE_DOTS and PIECE_SUM tasks on one device decode the split "
          "GEMV's tokens and logits") {
  const ModelWeights w = four_kv_heads("tiny");
  const test::SplitAndPieces g = test::split_and_piece_sums(w);
  CHECK(std::none_of(g.pieces.tasks.begin(), g.pieces.tasks.end(),
                     [](const SpTask& t) { return t.op == SP_OP_GEMV && t.operand[7] != 0; }));
  check_simulations(g.pieces, w, run_decode(g.split, w, {ExecutorKind::Sequential}, kPrompt, kNewTokens));
}

TEST_CASE("devices: expert parallel, each device's expert tasks hold its experts, and experts no device holds "
          "change the bits") {
  const ModelWeights w = four_kv_heads("tiny-qwen3.5-moe");
  const ModelConfig& c = w.config;
  const Graph good = build_decode_graph(w, expert_parallel(2));
  const uint32_t E = c.num_experts, k = c.experts_per_tok;
  std::vector<uint32_t> gate_up_tiles(2, 0), pieces(2, 0), held_params(2, SP_NO_VIEW), shared_tiles(2, 0);
  for (size_t i = 0; i < good.tasks.size(); ++i) {
    const SpTask& t = good.tasks[i];
    const uint32_t d = good.task_device[i];
    CAPTURE(i);
    if (t.op == SP_OP_EXPERT_GATE_UP || t.op == SP_OP_EXPERT_DOWN_PIECE) {
      REQUIRE(d < 2);
      const uint32_t params = t.operand[t.op == SP_OP_EXPERT_GATE_UP ? 5 : 4];
      const SpMoeParams& p = sp_op_record<SpMoeParams>(good.op_params[params]);
      CHECK(p.held_first == d * E / 2);
      CHECK(p.held_count == E / 2);
      held_params[d] = params;
    }
    if (t.op == SP_OP_EXPERT_GATE_UP) gate_up_tiles[d] += t.tile_end - t.tile_begin;
    if (t.op == SP_OP_EXPERT_DOWN_PIECE) {
      CHECK(t.operand[5] == 0);  // every device's slots in the one partial row
      CHECK(good.views[t.operand[3]].arena == SP_ARENA_SYMMETRIC);
      CHECK(good.is_broadcast(t.signal_counter));
      pieces[d] += t.tile_end - t.tile_begin;
    }
    if (t.op == SP_OP_EXPERT_DOWN_SUM) {
      CHECK(d == Graph::kEveryDevice);
      CHECK(t.operand[4] == 0);  // one piece: each slot's whole dot
      // The shared expert's dots in a piece a device, summed as a split {2, 2} sums them.
      CHECK(good.views[t.operand[5]].dtype == SP_F32);
      CHECK(good.views[t.operand[5]].rows == 2);
      const SpMoeParams& p = sp_op_record<SpMoeParams>(good.op_params[t.operand[3]]);
      CHECK(p.shared_split == gemv_split_word(2, 2));
    }
    if (t.op == SP_OP_GATE_UP) {  // the shared expert's rows [d Is/2, (d+1) Is/2) on device d
      REQUIRE(d < 2);
      CHECK(t.tile_begin / (c.shared_intermediate / 2) == d);
      CHECK((t.tile_end - 1) / (c.shared_intermediate / 2) == d);
      shared_tiles[d] += t.tile_end - t.tile_begin;
    }
    if (t.op == SP_OP_PIECE_DOTS) {
      REQUIRE(d < 2);
      CHECK(t.operand[3] == d);
      CHECK(good.is_broadcast(t.signal_counter));
    }
  }
  CHECK(shared_tiles[0] == c.n_layers * c.shared_intermediate / 2);
  CHECK(shared_tiles[1] == shared_tiles[0]);
  // Each device spans every slot's rows (it skips the slots of the other's experts) in each layer.
  CHECK(gate_up_tiles[0] == c.n_layers * k * c.moe_intermediate);
  CHECK(gate_up_tiles[1] == gate_up_tiles[0]);
  CHECK(pieces[0] == c.n_layers * c.hidden);
  CHECK(pieces[1] == pieces[0]);
  // Device 1 made to hold device 0's experts: the slots routed to experts E/2.. are then
  // computed by no device, and the logits change (or the devices disagree).
  Graph g = good;
  SpMoeParams& p1 = reinterpret_cast<SpMoeParams&>(g.op_params[held_params[1]]);
  p1.held_first = 0;
  validate(g);
  const Decoded expect = run_decode(good, w, {ExecutorKind::Sequential}, kPrompt, kNewTokens);
  Decoded got;
  const std::string error = error_of([&] { got = run_decode(g, w, {ExecutorKind::Sequential}, kPrompt, kNewTokens); });
  if (error == "(no error)")
    CHECK(std::memcmp(got.logits.data(), expect.logits.data(), expect.logits.size() * sizeof(float)) != 0);
  else
    CHECK(error.find("the devices of the graph disagree") != std::string::npos);
}

TEST_CASE("devices: expert parallel refuses one device, a model without routed experts, experts the devices do "
          "not divide, and held experts where no op skips them") {
  CHECK(error_of([&] { build_decode_graph(four_kv_heads("tiny-moe"), expert_parallel(1)); }) ==
        "expert parallel splits the routed experts over devices: it needs devices above 1");
  CHECK(error_of([&] { build_decode_graph(four_kv_heads("tiny"), expert_parallel(2)); }) ==
        "expert parallel splits the routed experts over devices, and a qwen3 model has none");
  ModelConfig six = four_kv_config("tiny-moe");
  six.num_experts = 6;
  const ModelWeights six_experts = test::weights_for("six-experts", six, 256);
  CHECK(error_of([&] { build_decode_graph(six_experts, expert_parallel(4)); }) ==
        "expert parallel over 4 devices: a device holds whole experts, and the 6 experts (num_experts) do not split "
        "evenly over them");
  const ModelWeights w = four_kv_heads("tiny-moe");
  const Graph good = build_decode_graph(w, expert_parallel(2));
  const auto problem = [](const Graph& g) { return error_of([&] { validate(g); }); };
  const uint32_t router = first_task(good, SP_OP_ROUTER), gate_up = first_task(good, SP_OP_EXPERT_GATE_UP);
  Graph g = good;  // the router's record, which the sums share, holding experts
  reinterpret_cast<SpMoeParams&>(g.op_params[g.tasks[router].operand[4]]).held_count = 2;
  CHECK(problem(g) == "graph: task " + std::to_string(router) +
                          " (router): its MoE parameters hold experts 0..2: only expert_gate_up and expert_down_piece "
                          "tasks skip other devices' experts");
  g = good;
  SpMoeParams& held = reinterpret_cast<SpMoeParams&>(g.op_params[g.tasks[gate_up].operand[5]]);
  held.held_first = 6;
  held.held_count = 3;
  CHECK(problem(g) == "graph: task " + std::to_string(gate_up) +
                          " (expert_gate_up): its MoE parameters hold experts 6..9, past the 8 experts");
  // A one-device graph's expert tasks holding some experts: the GPU executors, which run one
  // device, would compute every slot.
  g = build_decode_graph(w, over(1));
  const uint32_t first = first_task(g, SP_OP_EXPERT_GATE_UP);
  SpTask& one_device = g.tasks[first];
  g.op_params.push_back(g.op_params[one_device.operand[5]]);
  reinterpret_cast<SpMoeParams&>(g.op_params.back()).held_count = 4;
  one_device.operand[5] = uint32_t(g.op_params.size() - 1);
  CHECK(problem(g) == "graph: task " + std::to_string(first) +
                          " (expert_gate_up): its MoE parameters hold experts 0..4 in a graph of one device, which "
                          "must compute every expert's slots");
}

TEST_CASE("devices: each device computes its own heads' projections, attention and GDN, and its share of the MLP, expert, shared expert and LM head rows") {
  for (const std::string preset : {"tiny-qwen3.5", "tiny-qwen3.5-moe"}) {
    CAPTURE(preset);
    const ModelWeights w = four_kv_heads(preset);
    const Graph g = build_decode_graph(w, over(2));
    const SpGraphParams& p = g.params;
    const ModelConfig& c = w.config;
    const uint32_t unit_tiles = p.attn_q_splits * p.attn_chunks;
    const uint32_t device_state_rows = c.linear_num_value_heads / 2 * c.linear_value_head_dim;
    // The GDN projections' sections [begin, end): q, k, v, z, b, a.
    const uint64_t Ck = uint64_t(c.linear_num_key_heads) * c.linear_key_head_dim, Hv = c.linear_num_value_heads;
    const uint64_t Cv = Hv * c.linear_value_head_dim;
    std::vector<std::pair<uint64_t, uint64_t>> sections;
    for (uint64_t begin = 0; uint64_t width : {Ck, Ck, Cv, Cv, Hv, Hv}) {
      sections.push_back({begin, begin + width});
      begin += width;
    }
    const uint32_t proj = uint32_t(std::find(g.view_names.begin(), g.view_names.end(), "gdn_proj") - g.view_names.begin());
    REQUIRE(proj < g.views.size());
    std::vector<uint32_t> pieces(2, 0), gdn(2, 0);
    for (size_t i = 0; i < g.tasks.size(); ++i) {
      const SpTask& t = g.tasks[i];
      const uint32_t d = g.task_device[i];
      const std::string& w0 = g.view_names[t.operand[0]];
      CAPTURE(i);
      CAPTURE(w0);
      if (t.op == SP_OP_GATED_ATTENTION) {
        REQUIRE(d < 2);
        CHECK(t.tile_begin / unit_tiles / 2 == d);  // kv heads 2d and 2d + 1
      } else if (t.op == SP_OP_GEMV && (w0.ends_with("q_proj.weight") || w0.ends_with("k_proj.weight") ||
                                        w0.ends_with("v_proj.weight") || w0 == "lm_head.weight")) {
        REQUIRE(d < 2);  // half of each matrix's rows a device
        const uint32_t half = g.views[t.operand[0]].rows / 2;
        CHECK(t.tile_begin / half == d);
        CHECK((t.tile_end - 1) / half == d);
      } else if (t.op == SP_OP_GEMV && w0.find("linear_attn.in_proj") != std::string::npos) {
        REQUIRE(d < 2);  // q, k, v, z, b, a: each device its half of each
        const uint64_t at = (sp_view_offset(g.views[t.operand[3]]) - sp_view_offset(g.views[proj])) / sizeof(bf16);
        for (uint64_t r : {at + t.tile_begin, at + t.tile_end - 1}) {
          const auto section = std::find_if(sections.begin(), sections.end(), [&](auto s) { return r < s.second; });
          REQUIRE(section != sections.end());
          CHECK((r - section->first) / ((section->second - section->first) / 2) == d);
        }
      } else if (t.op == SP_OP_GDN) {
        REQUIRE(d < 2);
        CHECK(t.tile_begin / device_state_rows == d);
        CHECK((t.tile_end - 1) / device_state_rows == d);
        ++gdn[d];
      } else if (t.op == SP_OP_GATE_UP) {
        REQUIRE(d < 2);  // the dense MLP's rows or the shared expert's
        const uint32_t rows = w0.find("shared_expert") == std::string::npos ? p.intermediate : c.shared_intermediate;
        CHECK(t.tile_begin / (rows / 2) == d);
        CHECK((t.tile_end - 1) / (rows / 2) == d);
      } else if (t.op == SP_OP_EXPERT_GATE_UP) {
        REQUIRE(d < 2);  // rows [d Im/2, (d+1) Im/2) of a slot
        const uint32_t Im = c.moe_intermediate;
        CHECK(t.tile_begin % Im / (Im / 2) == d);
        CHECK(t.tile_begin / Im == (t.tile_end - 1) / Im);
      } else if (t.op == SP_OP_PIECE_DOTS || t.op == SP_OP_EXPERT_DOWN_PIECE) {
        REQUIRE(d < 2);
        const bool gemv = t.op == SP_OP_PIECE_DOTS;
        CHECK(t.operand[gemv ? 3 : 5] == d);
        CHECK(g.views[t.operand[gemv ? 2 : 3]].arena == SP_ARENA_SYMMETRIC);
        CHECK(g.is_broadcast(t.signal_counter));
        ++pieces[d];
      } else {
        CHECK(d == Graph::kEveryDevice);
      }
    }
    CHECK(pieces[0] > 0);
    CHECK(pieces[0] == pieces[1]);
    CHECK(gdn[0] > 0);
    CHECK(gdn[0] == gdn[1]);
  }
}

TEST_CASE("devices: partial sums that stay in one device's memory give other bits, so the simulation checks the exchange") {
  const ModelWeights w = four_kv_heads("tiny");
  const Decoded expect = run_decode(one_device_split(w, 2), w, {ExecutorKind::Sequential}, kPrompt, kNewTokens);
  Graph g = build_decode_graph(w, over(2));
  // The partials moved into the WORK arena, which each device holds apart: a device's sums then
  // read the other device's rows as never written.
  for (SpView& v : g.views)
    if (v.arena == SP_ARENA_SYMMETRIC) {
      v.arena = SP_ARENA_WORK;
      const uint64_t offset = g.arenas[SP_ARENA_WORK].bytes;
      v.offset_lo = uint32_t(offset);
      v.offset_hi = uint32_t(offset >> 32);
      g.arenas[SP_ARENA_WORK].bytes += uint64_t(v.rows) * v.row_stride * sp_dtype_bytes(v.dtype);
    }
  validate(g);
  // The devices then disagree on a token, or at least on the logits.
  Decoded got;
  const std::string error = error_of([&] { got = run_decode(g, w, {ExecutorKind::Sequential}, kPrompt, kNewTokens); });
  if (error == "(no error)")
    CHECK(std::memcmp(got.logits.data(), expect.logits.data(), expect.logits.size() * sizeof(float)) != 0);
  else
    CHECK(error == "device 1's step state (its tokens, position or flags) differs from device 0's after the run: the "
                   "devices of the graph disagree");
}

TEST_CASE("devices: a graph over devices saved and read again runs with the same bits") {
  const ModelWeights w = four_kv_heads("tiny-qwen3.5-moe");
  const Graph g = build_decode_graph(w, over(2));
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "spindle-devices-test.sptg";
  save_graph(path, g);
  const Graph read = load_graph(path);
  std::filesystem::remove(path);
  CHECK(read.devices == 2);
  CHECK(read.task_device == g.task_device);
  CHECK(read.broadcast_counters == g.broadcast_counters);
  check_same(run_decode(read, w, threaded(2, ScheduleKind::Ticket), kPrompt, kNewTokens),
             run_decode(g, w, {ExecutorKind::Sequential}, kPrompt, kNewTokens));
}

TEST_CASE("devices: a trace records each task run with its device, a task of every device once a device") {
  const ModelWeights w = four_kv_heads("tiny-moe");
  const Graph g = build_decode_graph(w, over(2));
  for (ExecutorOptions o : {ExecutorOptions{ExecutorKind::Sequential}, threaded(2, ScheduleKind::Ticket)}) {
    CAPTURE(executor_kind_name(o.kind));
    const std::unique_ptr<Executor> ex = make_executor(g, w, o);
    CHECK(ex->worker_count() == (o.kind == ExecutorKind::Threaded ? 4u : 1u));
    ex->set_tracing(true);
    decode(*ex, g, kPrompt, 2, {});
    std::vector<std::vector<uint32_t>> runs(g.tasks.size(), std::vector<uint32_t>(2, 0));
    uint32_t steps = 0;
    for (const TaskTrace& t : ex->trace()) {
      steps = std::max(steps, t.step + 1);
      REQUIRE(t.device < 2);
      CHECK(g.runs_on(t.task, t.device));
      if (o.kind == ExecutorKind::Threaded) CHECK(t.worker / 2 == t.device);  // device d's workers 2d, 2d + 1
      ++runs[t.task][t.device];
    }
    for (size_t i = 0; i < g.tasks.size(); ++i)
      for (uint32_t d = 0; d < 2; ++d) CHECK(runs[i][d] == (g.runs_on(i, d) ? steps : 0u));
  }
}

TEST_CASE("devices: a split the model or the options cannot take is refused, naming why") {
  const ModelWeights& tiny = tiny_model().weights;  // 2 kv heads
  CHECK(error_of([&] { build_decode_graph(tiny, over(0)); }) == "devices 0: from 1 to 256");
  CHECK(error_of([&] { build_decode_graph(tiny, over(257)); }) == "devices 257: from 1 to 256");
  CHECK(error_of([&] { build_decode_graph(tiny, over(3)); }) ==
        "3 devices: a device holds whole kv heads, or a kv head's q heads are shared by devices alike, and the "
        "model's 2 (num_key_value_heads) neither split evenly over them nor divide them");
  // 2 kv heads of one q head each over 4 devices: a q head each device is not there to share.
  ModelConfig lone = synthetic_config("tiny");
  lone.n_heads = 2;
  const ModelWeights lone_heads = test::weights_for("lone-q-heads", lone, 256);
  CHECK(error_of([&] { build_decode_graph(lone_heads, over(4)); }) ==
        "4 devices: each of the 2 kv heads' q heads are shared by 2 devices, and a kv head's 1 q heads "
        "(num_attention_heads / num_key_value_heads) do not split evenly over them");
  const ModelWeights two_kv = two_kv_heads("tiny");
  BuildOptions one_split = over(4);
  one_split.attn_q_splits = 1;
  CHECK(error_of([&] { build_decode_graph(two_kv, one_split); }) ==
        "attention q-head splits 1: over 4 devices each kv head's splits are shared by 2 devices, which must divide "
        "them");
  BuildOptions o = over(2);
  o.kv_head_waits = true;
  CHECK(error_of([&] { build_decode_graph(tiny, o); }) ==
        "kv_head_waits, a schedule of one device's stages, does not apply over 2 devices");
  o = over(2);
  o.fused_mlp = {16, 4};
  CHECK(error_of([&] { build_decode_graph(tiny, o); }) == "the fused MLP (one device's gangs) does not apply over 2 devices");
  o = over(2);
  o.down_split = {2, 2};
  CHECK(error_of([&] { build_decode_graph(tiny, o); }) ==
        "an o_proj, down, GDN out_proj, expert down or shared expert down split does not apply over 2 devices: "
        "there each dot is split into a piece a device");
  o = over(2);
  o.shared_down_split = {2, 2};
  CHECK(error_of([&] { build_decode_graph(four_kv_heads("tiny-qwen3.5-moe"), o); }) ==
        "an o_proj, down, GDN out_proj, expert down or shared expert down split does not apply over 2 devices: "
        "there each dot is split into a piece a device");
  // tiny-qwen3.5's 2 GDN key heads over 4 devices (its kv heads raised to 4).
  ModelConfig hybrid = synthetic_config("tiny-qwen3.5");
  hybrid.n_heads = 8;
  hybrid.n_kv_heads = 4;
  const ModelWeights two_key_heads = test::weights_for("two-key-heads", hybrid, 256);
  CHECK(error_of([&] { build_decode_graph(two_key_heads, over(4)); }) ==
        "4 devices: a device holds whole GDN key heads with their value heads, and the model's 2 "
        "(linear_num_key_heads) do not split evenly over them");
  // 8 kv heads of 16 columns: 8 devices cut o_proj's rows into pieces of 16 columns, but down's 40
  // columns into 5, not whole octets.
  ModelConfig c = synthetic_config("tiny");
  c.n_heads = c.n_kv_heads = 8;
  c.intermediate = 40;
  const ModelWeights narrow = test::weights_for("narrow", c, 256);
  CHECK(error_of([&] { build_decode_graph(narrow, over(8)); }) ==
        "down over 8 devices, split 8/8: the split's pieces are not whole octets (a multiple of 8 columns each) "
        "(40 columns)");
  // A shared expert of 24 columns: 2 devices cut its down into pieces of 12.
  ModelConfig shared = four_kv_config("tiny-qwen3.5-moe");
  shared.shared_intermediate = 24;
  const ModelWeights narrow_shared = test::weights_for("narrow-shared", shared, 256);
  for (const BuildOptions& o : {over(2), expert_parallel(2)})
    CHECK(error_of([&] { build_decode_graph(narrow_shared, o); }) ==
          "shared expert down over 2 devices, split 2/2: the split's pieces are not whole octets (a multiple of 8 "
          "columns each) (24 columns)");
}

TEST_CASE("devices: the GPU executors refuse a graph over several devices, naming the ones that run it") {
  const ModelWeights w = four_kv_heads("tiny");
  const Graph g = build_decode_graph(w, over(2));
  for (ExecutorKind kind : {ExecutorKind::Cuda, ExecutorKind::Vulkan}) {
    ExecutorOptions o;
    o.kind = kind;
    CHECK(error_of([&] { make_executor(g, w, o); }) ==
          std::string("the graph is split over 2 devices, which the ") + executor_kind_name(kind) +
              " executor does not run yet; the CPU executors (sequential, fp64, threaded) simulate them");
  }
}

TEST_CASE("devices: validate refuses device lists and exchanges that a device could not follow") {
  const ModelWeights w = four_kv_heads("tiny");
  const Graph good = build_decode_graph(w, over(2));
  const uint32_t dots = first_task(good, SP_OP_PIECE_DOTS), sum = first_task(good, SP_OP_PIECE_SUM);
  const auto problem = [](const Graph& g) { return error_of([&] { validate(g); }); };

  Graph g = good;
  g.task_device.pop_back();
  CHECK(problem(g) == "graph: " + std::to_string(g.tasks.size()) + " tasks but " + std::to_string(g.tasks.size() - 1) +
                          " task devices");
  g = good;
  g.task_device[dots] = 2;
  CHECK(problem(g) == "graph: task " + std::to_string(dots) + " (piece_dots) runs on device 2, but the graph has 2 devices");
  g = good;
  g.task_device[dots] = Graph::kEveryDevice;
  CHECK(problem(g).starts_with("graph: task " + std::to_string(dots) + " (piece_dots) runs on every device and writes view "));
  g = good;
  g.broadcast_counters.erase(std::find(g.broadcast_counters.begin(), g.broadcast_counters.end(),
                                       g.tasks[dots].signal_counter));
  CHECK(problem(g).find("in the symmetric arena but signals counter") != std::string::npos);
  g = good;
  g.task_device[sum] = 1;  // device 0 no longer sums these rows: its next stage's wait is one short
  CHECK(problem(g).find("tasks signal it on device 0") != std::string::npos);
  g = good;
  g.params.attn_kv_share = 2;  // 2 devices over 4 kv heads share none
  CHECK(problem(g) == "graph: the graph's attn_kv_share 2 is not the 1 that its 2 devices over its 4 kv heads give, or "
                      "does not divide its 2 q-head splits");
  g = build_decode_graph(two_kv_heads("tiny"), over(4));
  g.params.attn_kv_share = 0;  // the second device of each kv head would not append its rows
  CHECK(problem(g) == "graph: the graph's attn_kv_share 0 is not the 2 that its 4 devices over its 2 kv heads give, or "
                      "does not divide its 4 q-head splits");
  g = good;
  g.devices = 1;
  CHECK(problem(g).starts_with("graph: one device, but "));
  g.devices = 257;
  CHECK(problem(g) == "graph: 257 devices, not from 1 to 256");
}

TEST_CASE("devices: validate refuses a sum task's shared expert operands that do not go together") {
  const ModelWeights w = four_kv_heads("tiny-qwen3.5-moe");
  const auto problem = [](const Graph& g) { return error_of([&] { validate(g); }); };
  const auto view = [](const Graph& g, const std::string& name) {
    return uint32_t(std::find(g.view_names.begin(), g.view_names.end(), name) - g.view_names.begin());
  };
  // Tensor-parallel experts: the shared expert's down dots in pieces (operand 5, f32) and its gate.
  const Graph pieces = build_decode_graph(w, over(2));
  const uint32_t sum = first_task(pieces, SP_OP_EXPERT_DOWN_SUM);
  const std::string task = "graph: task " + std::to_string(sum) + " (expert_down_sum): ";
  REQUIRE(pieces.views[pieces.tasks[sum].operand[5]].dtype == SP_F32);
  Graph g = pieces;
  g.tasks[sum].operand[6] = view(g, "shared_expert_act");
  CHECK(problem(g) == task + "the shared expert's activations beside its down dots' pieces, which hold them already");
  g = pieces;
  g.tasks[sum].operand[7] = SP_NO_VIEW;
  CHECK(problem(g) == task + "the shared expert's down dots' pieces without its gate (operand 7)");
  g = pieces;
  g.tasks[sum].operand[5] = SP_NO_VIEW;
  CHECK(problem(g) == task + "a shared expert's activations or gate without its down rows (operand 5)");
  // Expert parallel: the shared expert's split (its MoE record's), which must have pieces to sum
  // and groups that divide them.
  g = build_decode_graph(w, expert_parallel(2));
  const uint32_t ep_sum = first_task(g, SP_OP_EXPERT_DOWN_SUM);
  const std::string ep_task = "graph: task " + std::to_string(ep_sum) + " (expert_down_sum): ";
  const std::string split = "the shared expert's down dots' split (its MoE parameters' shared_split, else operand 4)";
  SpMoeParams& record = reinterpret_cast<SpMoeParams&>(g.op_params[g.tasks[ep_sum].operand[3]]);
  CHECK(problem(g) == "(no error)");
  record.shared_split = gemv_split_word(3, 2);
  CHECK(problem(g) == ep_task + split + ": its groups do not divide its pieces");
  record.shared_split = 0;  // the slots' split then: one piece
  CHECK(problem(g) == ep_task + split + " has fewer than 2 pieces: there is nothing to sum");
  // One device, the routed dots split and the shared expert's whole: its down rows (bf16), its
  // activations and its gate.
  BuildOptions whole_shared = over(1);
  whole_shared.expert_down_split = {2, 2};
  whole_shared.shared_down_split = {1, 0};
  g = build_decode_graph(w, whole_shared);
  const uint32_t rows_sum = first_task(g, SP_OP_EXPERT_DOWN_SUM);
  REQUIRE(g.views[g.tasks[rows_sum].operand[5]].dtype == SP_BF16);
  g.tasks[rows_sum].operand[6] = SP_NO_VIEW;
  CHECK(problem(g) == "graph: task " + std::to_string(rows_sum) +
                          " (expert_down_sum): the shared expert's down rows without its activations and gate");
}

TEST_CASE("devices: a device's weight shard holds the rows its tasks read, a share of the split tensors, and its "
          "experts alone expert parallel") {
  const ModelWeights w = four_kv_heads("tiny-moe");
  const auto tensor_range = [&](const Graph& g, const std::string& name) {
    const auto it = std::find(g.view_names.begin(), g.view_names.end(), name);
    REQUIRE(it != g.view_names.end());
    const SpView& v = g.views[it - g.view_names.begin()];
    const uint64_t at = sp_view_offset(v);
    return std::pair{v.arena - SP_ARENA_WEIGHTS0, ByteRange{at, at + uint64_t(v.rows) * v.row_stride * sp_dtype_bytes(v.dtype)}};
  };
  // The bytes of [begin, end) of arena a that a shard holds.
  const auto held = [](const WeightShard& s, uint32_t a, ByteRange in) {
    uint64_t n = 0;
    for (const ByteRange& r : s.arenas[a]) n += std::min(r.end, in.end) > std::max(r.begin, in.begin)
                                                   ? std::min(r.end, in.end) - std::max(r.begin, in.begin) : 0;
    return n;
  };
  // One device reads every tensor whole (its graph's weight views are the tensors).
  const Graph one = build_decode_graph(w, over(1));
  uint64_t weights = 0;
  for (const SpView& v : one.views)
    if (v.arena >= SP_ARENA_WEIGHTS0) weights += uint64_t(v.rows) * v.row_stride * sp_dtype_bytes(v.dtype);
  CHECK(device_weight_shard(one, 0).bytes() == weights);
  // Two: half of each split projection's rows, the embedding whole on both.
  const Graph tp = build_decode_graph(w, over(2));
  const WeightShard d0 = device_weight_shard(tp, 0), d1 = device_weight_shard(tp, 1);
  CHECK(d0.bytes() < weights);
  CHECK(d0.bytes() + d1.bytes() > weights);  // what both hold: the embedding, norms, router
  for (const char* name : {"model.layers.0.self_attn.q_proj.weight", "model.layers.1.self_attn.o_proj.weight",
                           "lm_head.weight", "model.layers.0.mlp.experts.gate_up_proj",
                           "model.layers.1.mlp.experts.down_proj"}) {
    CAPTURE(name);
    const auto [a, range] = tensor_range(tp, name);
    CHECK(held(d0, a, range) == (range.end - range.begin) / 2);
    CHECK(held(d1, a, range) == (range.end - range.begin) / 2);
  }
  for (const char* name : {"model.embed_tokens.weight", "model.layers.0.mlp.gate.weight"}) {
    CAPTURE(name);
    const auto [a, range] = tensor_range(tp, name);
    CHECK(held(d0, a, range) == range.end - range.begin);
    CHECK(held(d1, a, range) == range.end - range.begin);
  }
  // Expert parallel over 2: device 0 holds experts 0..3 whole, none of 4..7.
  const Graph ep = build_decode_graph(w, expert_parallel(2));
  const WeightShard e0 = device_weight_shard(ep, 0);
  const auto [a, gate_up] = tensor_range(ep, "model.layers.0.mlp.experts.gate_up_proj");
  const uint64_t half = (gate_up.end - gate_up.begin) / 2;
  CHECK(held(e0, a, {gate_up.begin, gate_up.begin + half}) == half);
  CHECK(held(e0, a, {gate_up.begin + half, gate_up.end}) == 0);
}

TEST_CASE("devices: each device holding its weight shard alone (the rest NaN) decodes the shared weights' tokens and "
          "logits, for every family, tensor and expert parallel") {
  for (const std::string preset : {"tiny", "tiny-moe", "tiny-qwen3.5", "tiny-qwen3.5-moe", "tiny-qwen3-next"}) {
    const ModelWeights w = four_kv_heads(preset);
    for (uint32_t devices : {2u, 4u})
      for (bool ep : {false, true}) {
        if (ep && !w.config.num_experts) continue;
        CAPTURE(preset);
        CAPTURE(devices);
        CAPTURE(ep);
        const Graph g = build_decode_graph(w, ep ? expert_parallel(devices) : over(devices));
        const Decoded expect = run_decode(g, w, {ExecutorKind::Sequential}, kPrompt, kNewTokens);
        ExecutorOptions sharded{ExecutorKind::Sequential};
        sharded.shard_weights = true;
        check_same(run_decode(g, w, sharded, kPrompt, kNewTokens), expect);
        ExecutorOptions threads = threaded(2, ScheduleKind::Ticket);
        threads.shard_weights = true;
        check_same(run_decode(g, w, threads, kPrompt, kNewTokens), expect);
      }
  }
  ExecutorOptions vulkan{ExecutorKind::Vulkan};
  vulkan.shard_weights = true;
  const ModelWeights& tiny = tiny_model().weights;
  CHECK(error_of([&] { make_executor(build_decode_graph(tiny, over(1)), tiny, vulkan); }) ==
        "the vulkan executor holds every weight; only the CPU executors (sequential, fp64, threaded) shard them");
}

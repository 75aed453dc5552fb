// The persistent kernel's L2 prefetch plan (megakernel/l2_prefetch.h), checked on the host
// against the graph walked granule by granule: which 16-byte granules of the weight arenas and
// the recurrent state each stage's tasks prefetch, against the rows of the stage `distance`
// stages later.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "executors_fixture.h"
#include "megakernel/l2_prefetch.h"
#include "megakernel/per_op.h"

using namespace spindle;
using Granules = std::set<std::pair<uint32_t, uint64_t>>;  // (arena, offset / 16)

namespace {

// The granules of every weight row the stage's projection tasks read, of an MLP member's gate
// and up rows and its down piece j, which the persistent kernel holds piece-major
// (repack_down.h): bytes [j·H·P·2, (j+1)·H·P·2) of the down view, and of a GDN task's state
// rows (its tiles, dk f32 each).
Granules rows_of(const Graph& g, const cuda::Stage& st) {
  Granules out;
  for (uint32_t i = st.first_task; i < st.first_task + st.tasks; ++i) {
    const SpTask& t = g.tasks[i];
    if (t.op == SP_OP_GDN) {
      const SpView& S = g.views[t.operand[6]];
      for (uint64_t r = t.tile_begin; r < t.tile_end; ++r) {
        const uint64_t first = sp_view_offset(S) + r * S.row_stride * 4u;
        for (uint64_t b = first / 16; b < (first + S.cols * 4u + 15) / 16; ++b) out.insert({S.arena, b});
      }
      continue;
    }
    const uint32_t matrices = t.op == SP_OP_MLP ? 2u : sp_projection_matrices(t.op);
    for (uint32_t m = 0; m < matrices; ++m) {
      const SpView& W = g.views[t.operand[m]];
      for (uint32_t r = t.tile_begin; r < t.tile_end; ++r) {
        const uint64_t first = sp_view_offset(W) + uint64_t(r) * W.row_stride * 2u;
        for (uint64_t b = first / 16; b < (first + W.cols * 2u + 15) / 16; ++b) out.insert({W.arena, b});
      }
    }
    if (t.op == SP_OP_MLP) {
      const SpView& Wd = g.views[t.operand[2]];
      const uint64_t P = t.tile_end - t.tile_begin, block = Wd.rows * P * 2u;
      const uint64_t first = sp_view_offset(Wd) + t.tile_begin / P * block;
      for (uint64_t b = first / 16; b < (first + block + 15) / 16; ++b) out.insert({Wd.arena, b});
    }
  }
  return out;
}

// The granules the stage's tasks prefetch; every granule once, every range aligned and inside
// its weight arena or the recurrent state.
Granules prefetched_by(const Graph& g, const cuda::Stage& st, const std::vector<cuda::L2Prefetch>& plan) {
  Granules out;
  for (uint32_t i = st.first_task; i < st.first_task + st.tasks; ++i) {
    const cuda::L2Prefetch& p = plan[i];
    if (!p.bytes) continue;
    CHECK((p.arena >= SP_ARENA_WEIGHTS0 || p.arena == SP_ARENA_RECURRENT));
    CHECK(p.offset % 16 == 0);
    CHECK(p.bytes % 16 == 0);
    CHECK(p.offset + p.bytes <= g.arenas[p.arena].bytes);
    for (uint64_t b = p.offset / 16; b < (p.offset + p.bytes) / 16; ++b) CHECK(out.insert({p.arena, b}).second);
  }
  return out;
}

}  // namespace

TEST_CASE("each stage prefetches exactly the weights of the stage `distance` later, around the step, MLP gangs and GDN state too") {
  static const TinyModel hybrid = [] {
    TinyModel t{load_model("synthetic:tiny-qwen3.5"), {}};
    BuildOptions o;
    o.gdn_gang = 2;  // a value head's rows over a gang's two records
    t.graph = build_decode_graph(t.weights, o);
    return t;
  }();
  REQUIRE(std::any_of(hybrid.graph.tasks.begin(), hybrid.graph.tasks.end(), [](const SpTask& t) { return t.op == SP_OP_GDN; }));
  for (const TinyModel* m : {&tiny_model(), &tiny_fused_mlp_model(), &hybrid}) {
    const Graph& g = m->graph;
    const std::vector<cuda::Stage> stages = cuda::graph_stages(g);
    for (const SpView& v : g.views) REQUIRE(v.row_stride == v.cols);  // rows without gaps: spans are rows
    for (uint32_t distance : {1u, 2u, 3u}) {
      CAPTURE(distance);
      const std::vector<cuda::L2Prefetch> plan = cuda::plan_l2_prefetch(g, stages, distance, uint64_t(1) << 30);
      REQUIRE(plan.size() == g.tasks.size());
      size_t with_weights = 0, state_granules = 0;
      for (size_t s = 0; s < stages.size(); ++s) {
        CAPTURE(s);
        const Granules want = rows_of(g, stages[(s + distance) % stages.size()]);
        with_weights += !want.empty();
        state_granules += std::count_if(want.begin(), want.end(), [](const auto& x) { return x.first == SP_ARENA_RECURRENT; });
        CHECK(prefetched_by(g, stages[s], plan) == want);
      }
      CHECK(with_weights > stages.size() / 2);  // the check above saw real ranges
      CHECK((state_granules > 0) == (m == &hybrid));
    }
  }
}

TEST_CASE("a layer's qkv stages a kv head prefetch and are prefetched as the one stage they replace") {
  const Graph& plain = tiny_model().graph;
  const Graph& heads = tiny_head_waits_model().graph;
  // Per stage of the plain graph, the granules prefetched by its tasks, or by those of the kv
  // heads' stages that replace it (named "<its name>.kv<g>").
  const auto by_stage = [](const Graph& g, const std::vector<cuda::L2Prefetch>& plan) {
    std::map<std::string, Granules> out;
    for (const cuda::Stage& st : cuda::graph_stages(g)) {
      std::string name = g.counter_names[g.tasks[st.first_task].signal_counter];
      name = name.substr(0, name.find(".kv"));
      out[name].merge(prefetched_by(g, st, plan));
    }
    return out;
  };
  for (uint32_t distance : {1u, 2u, 3u}) {
    CAPTURE(distance);
    const auto want = by_stage(plain, cuda::plan_l2_prefetch(plain, cuda::graph_stages(plain), distance, 1u << 30));
    const auto got = by_stage(heads, cuda::plan_l2_prefetch(heads, cuda::graph_stages(heads), distance, 1u << 30));
    CHECK(cuda::graph_stages(heads).size() == cuda::graph_stages(plain).size() + 2);  // tiny: 2 layers, 2 kv heads
    CHECK(got == want);
  }
}

TEST_CASE("a stage budget prefetches the target's leading rows, about that many bytes") {
  const Graph& g = tiny_model().graph;
  const std::vector<cuda::Stage> stages = cuda::graph_stages(g);
  const uint64_t budget = 4096;
  const std::vector<cuda::L2Prefetch> plan = cuda::plan_l2_prefetch(g, stages, 1, budget);
  for (size_t s = 0; s < stages.size(); ++s) {
    CAPTURE(s);
    const cuda::Stage& target = stages[(s + 1) % stages.size()];
    const Granules all = rows_of(g, target), got = prefetched_by(g, stages[s], plan);
    for (const auto& granule : got) CHECK(all.count(granule));
    if (all.empty()) continue;
    CHECK(got.size() * 16 >= budget);
    CHECK(got.size() * 16 <= budget + 16 * 2 * target.tasks);  // each span rounded outward
    const SpTask& first = g.tasks[target.first_task];  // the rows tickets hand out first
    const SpView& W = g.views[first.operand[0]];
    CHECK(got.count({W.arena, (sp_view_offset(W) + uint64_t(first.tile_begin) * W.row_stride * 2u) / 16}));
  }
}

TEST_CASE("distance 0 or a zero budget prefetches nothing") {
  const Graph& g = tiny_model().graph;
  const std::vector<cuda::Stage> stages = cuda::graph_stages(g);
  for (const auto& [distance, budget] : {std::pair<uint32_t, uint64_t>{0, 1u << 30}, {2, 0}})
    for (const cuda::L2Prefetch& p : cuda::plan_l2_prefetch(g, stages, distance, budget)) CHECK(p.bytes == 0);
}

TEST_CASE("op_runs joins consecutive stages of one op and layer, but never stages of gang tasks") {
  // Four records, two stages of two: GEMVs of one layer join; MLP gang members (width 2) do not.
  const auto runs_of = [](uint32_t op, uint8_t width) {
    Graph g;
    for (uint32_t i = 0; i < 4; ++i) {
      SpTask t{};
      t.op = op;
      t.signal_counter = i / 2;
      t.gang_width = width;
      t.gang_rank = uint8_t(width > 1 ? i % 2 : 0);
      g.tasks.push_back(t);
    }
    const std::vector<cuda::Stage> stages = cuda::graph_stages(g);
    REQUIRE(stages.size() == 2);
    return cuda::op_runs(g, stages);
  };
  const std::vector<cuda::Stage> joined = runs_of(SP_OP_GEMV, 0), gangs = runs_of(SP_OP_MLP, 2);
  REQUIRE(joined.size() == 1);
  CHECK(joined[0].first_task == 0);
  CHECK(joined[0].tasks == 4);
  CHECK(gangs.size() == 2);
}

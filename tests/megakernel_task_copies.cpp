// The persistent kernel's weight copies as the host resolves them (megakernel/task_copies.h),
// checked against each task's rows computed here from its views.
#include <doctest/doctest.h>

#include "executors_fixture.h"
#include "host/graph_builder.h"
#include "host/model_weights.h"
#include "megakernel/task_copies.h"
#include "megakernel/task_smem.h"
#include "megakernel/tile_layout.h"

using namespace spindle;

namespace {

constexpr uint64_t kSmem = 227u << 10;

// The bytes of rows [tile_begin, tile_end) of view W, from the first row's start to the last
// row's end.
uint64_t rows_bytes(const SpTask& t, const SpView& W) {
  return (uint64_t(t.tile_end - t.tile_begin - 1) * W.row_stride + W.cols) * 2u;
}

void check_span(const cuda::ArenaSpan& s, uint32_t arena, uint64_t offset, uint64_t bytes) {
  CHECK(s.arena == arena);
  CHECK(s.offset == offset);
  CHECK(s.bytes == bytes);
}

}  // namespace

TEST_CASE("a projection task's copy is its rows of each matrix, one after the other, at the tile's preload offset") {
  const Graph& g = tiny_model().graph;
  size_t copied = 0;
  for (const SpTask& t : g.tasks) {
    CAPTURE(sp_opcode_name(t.op));
    const cuda::TaskCopy c = cuda::task_copy(g, t, {1u << 20, kSmem, true});
    const uint32_t matrices = sp_projection_matrices(t.op);
    if (!matrices || t.tile_end <= t.tile_begin) {
      CHECK(c.bytes == 0);
      continue;
    }
    const SpView& W = g.views[t.operand[0]];
    const uint64_t span = rows_bytes(t, W);
    REQUIRE(c.spans == matrices);
    CHECK(c.bytes == matrices * span);
    CHECK(c.at == cuda::projection_preload_offset(W.cols));
    for (uint32_t m = 0; m < matrices; ++m) {
      const SpView& Wm = g.views[t.operand[m]];
      check_span(c.span[m], Wm.arena, sp_view_offset(Wm) + uint64_t(t.tile_begin) * Wm.row_stride * 2u, span);
    }
    ++copied;
  }
  CHECK(copied > 10);
}

TEST_CASE("MoE: a router task's copy is its rows of the router, a routed expert task has none") {
  BuildOptions o;
  o.context = 16;
  const Graph g = build_decode_graph(load_model("synthetic:tiny-moe"), o);
  size_t routers = 0;
  for (const SpTask& t : g.tasks) {
    const cuda::TaskCopy c = cuda::task_copy(g, t, {1u << 20, kSmem, true});
    if (t.op == SP_OP_EXPERT_GATE_UP || t.op == SP_OP_EXPERT_DOWN) CHECK(c.bytes == 0);
    if (t.op != SP_OP_ROUTER) continue;
    const SpView& W = g.views[t.operand[0]];
    REQUIRE(c.spans == 1);
    check_span(c.span[0], W.arena, sp_view_offset(W) + uint64_t(t.tile_begin) * W.row_stride * 2u, rows_bytes(t, W));
    CHECK(c.bytes == rows_bytes(t, W));
    ++routers;
  }
  CHECK(routers > 0);
}

// The copy lies where its task's tile, which reads it, does not write.
TEST_CASE("every copy lies above its task's tile, plain and fused graphs, tiny and qwen3-0.6b") {
  const ModelWeights w = load_model("synthetic:qwen3-0.6b");
  const Graph plain = qwen06b_graph(w, TwoHop::Plain), fused = qwen06b_graph(w, TwoHop::FusedMlp);
  for (const Graph* g : {&tiny_model().graph, &tiny_fused_mlp_model().graph, &plain, &fused}) {
    size_t copies = 0;
    for (const SpTask& t : g->tasks) {
      const cuda::TaskCopy c = cuda::task_copy(*g, t, {1u << 20, kSmem, true});
      if (!c.bytes) continue;
      CAPTURE(sp_opcode_name(t.op));
      CHECK(c.at >= cuda::task_smem_bytes(*g, t, g->params.context, g->params.context));
      CHECK(c.at % 128 == 0);
      ++copies;
    }
    CHECK(copies > 0);
  }
}

TEST_CASE("an MLP member's copy is its gate rows, up rows and piece-major down block, only when it runs at once") {
  const Graph& g = tiny_fused_mlp_model().graph;
  size_t members = 0;
  for (const SpTask& t : g.tasks) {
    if (t.op != SP_OP_MLP) continue;
    CHECK(cuda::task_copy(g, t, {1u << 20, kSmem, false}).bytes == 0);
    const cuda::TaskCopy c = cuda::task_copy(g, t, {1u << 20, kSmem, true});
    const SpView &Wg = g.views[t.operand[0]], &Wu = g.views[t.operand[1]], &Wd = g.views[t.operand[2]];
    const uint32_t P = t.tile_end - t.tile_begin;
    const uint64_t span = rows_bytes(t, Wg), block = uint64_t(Wd.rows) * P * 2u;
    REQUIRE(c.spans == 3);
    CHECK(c.bytes == 2 * span + block);
    CHECK(c.at == cuda::mlp_preload_offset(Wd.rows, P));
    check_span(c.span[0], Wg.arena, sp_view_offset(Wg) + uint64_t(t.tile_begin) * Wg.row_stride * 2u, span);
    check_span(c.span[1], Wu.arena, sp_view_offset(Wu) + uint64_t(t.tile_begin) * Wu.row_stride * 2u, span);
    check_span(c.span[2], Wd.arena, sp_view_offset(Wd) + uint64_t(t.tile_begin / P) * block, block);
    ++members;
  }
  CHECK(members == 16 * g.params.n_layers);
}

TEST_CASE("no copy for an MLP task run alone (gang width 1), nor when its gate and up rows are laid out apart") {
  Graph g = tiny_fused_mlp_model().graph;
  SpTask* member = nullptr;
  for (SpTask& t : g.tasks)
    if (t.op == SP_OP_MLP && !member) member = &t;
  REQUIRE(member);
  REQUIRE(cuda::task_copy(g, *member, {1u << 20, kSmem, true}).bytes > 0);
  SpTask alone = *member;
  alone.gang_width = 1;
  alone.gang_rank = 0;
  CHECK(cuda::task_copy(g, alone, {1u << 20, kSmem, true}).bytes == 0);
  g.views[member->operand[1]].row_stride += 8;  // up's rows further apart than gate's
  CHECK(cuda::task_copy(g, *member, {1u << 20, kSmem, true}).bytes == 0);
}

TEST_CASE("no copy past the projection budget or the shared memory, with copies off, or of unaligned or non-weight rows") {
  Graph g = tiny_model().graph;
  const auto first_of = [&](uint32_t op) {
    for (SpTask& t : g.tasks)
      if (t.op == op && t.tile_end > t.tile_begin) return &t;
    FAIL("no such task");
    return &g.tasks[0];
  };
  const SpTask& gemv = *first_of(SP_OP_GEMV);
  const uint32_t bytes = cuda::task_copy(g, gemv, {1u << 20, kSmem, true}).bytes;
  REQUIRE(bytes > 0);
  CHECK(cuda::task_copy(g, gemv, {bytes, kSmem, true}).bytes == bytes);
  CHECK(cuda::task_copy(g, gemv, {bytes - 16, kSmem, true}).bytes == 0);
  const uint32_t end = cuda::projection_preload_offset(g.views[gemv.operand[0]].cols) + bytes;
  CHECK(cuda::task_copy(g, gemv, {1u << 20, end, true}).bytes == bytes);
  CHECK(cuda::task_copy(g, gemv, {1u << 20, end - 1, true}).bytes == 0);
  for (const SpTask& t : g.tasks) CHECK(cuda::task_copy(g, t, {0, kSmem, true}).bytes == 0);

  SpView& W = g.views[gemv.operand[0]];
  const SpView kept = W;
  W.offset_lo += 8;  // rows 8 bytes off a 16-byte boundary
  CHECK(cuda::task_copy(g, gemv, {1u << 20, kSmem, true}).bytes == 0);
  W = kept;
  W.arena = SP_ARENA_WORK;  // activations are never copied before the wait
  CHECK(cuda::task_copy(g, gemv, {1u << 20, kSmem, true}).bytes == 0);
}

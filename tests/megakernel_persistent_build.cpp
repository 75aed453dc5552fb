// Which build of the persistent kernel runs a graph (megakernel/persistent_build.h): the
// smallest with a tile for every task.
#include <doctest/doctest.h>

#include "executors_fixture.h"
#include "host/graph_builder.h"
#include "megakernel/persistent_build.h"

using namespace spindle;

namespace {

Graph graph_of(const char* model, GemvSplit o_proj_split = {}) {
  BuildOptions o;
  o.context = 64;
  o.o_proj_split = o_proj_split;
  return build_decode_graph(load_model(model), o);
}

}  // namespace

TEST_CASE("dense graphs run in the plain build, qwen3_moe's in the MoE build, split dots and hybrid families in the two-hop build") {
  CHECK(cuda::persistent_build(tiny_model().graph) == cuda::TileBuild::kPlain);
  CHECK(cuda::persistent_build(build_tiny({2, 0}, {}).graph) == cuda::TileBuild::kTwoHop);   // split GEMV dots
  CHECK(cuda::persistent_build(tiny_fused_mlp_model().graph) == cuda::TileBuild::kTwoHop);  // MLP gangs
  CHECK(cuda::persistent_build(graph_of("synthetic:tiny-moe")) == cuda::TileBuild::kMoe);
  CHECK(cuda::persistent_build(graph_of("synthetic:tiny-moe", {2, 0})) == cuda::TileBuild::kTwoHop);
  for (const char* hybrid : kHybridPresets) {
    CAPTURE(hybrid);
    CHECK(cuda::persistent_build(graph_of(hybrid)) == cuda::TileBuild::kTwoHop);  // GDN, gated attention
  }
}

TEST_CASE("a graph with an op whose tile only the per-op kernels have is refused, naming its first task") {
  BuildOptions o;
  o.context = 64;
  o.expert_down_split = {2, 2};
  const Graph g = build_decode_graph(load_model("synthetic:tiny-moe"), o);
  const uint32_t piece = first_task(g, SP_OP_EXPERT_DOWN_PIECE);
  CHECK(error_of([&] { cuda::persistent_build(g); }) ==
        "cuda megakernel: task " + std::to_string(piece) +
            " (expert_down_piece) has no tile in the persistent kernel yet; the per-op and graph modes run it "
            "(--profile per-op, --profile graph)");
}

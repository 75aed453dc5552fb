// The cluster program's plan (megakernel/cluster_program.h) as the host reads it from a graph:
// which graphs it takes, why it refuses the others, and every layer's operand resolved to the
// view of the same name.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "executors_fixture.h"
#include "megakernel/cluster_program.h"

using namespace spindle;

TEST_CASE("a graph built for the cluster program resolves each layer's operands to the views of their names") {
  const Graph g = qwen06b_graph(qwen06b_weights(), TwoHop::Cluster);
  CHECK(cuda::cluster_program_problem(g).empty());
  std::vector<uint8_t*> bases;  // fake arena addresses, far apart
  for (uint32_t a = 0; a < g.arenas.size(); ++a) bases.push_back(reinterpret_cast<uint8_t*>(uintptr_t(a + 1) << 40));
  const cuda::ClusterPlan plan = cuda::plan_cluster_program(g, bases);
  std::map<std::string, uint32_t> by_name;
  for (uint32_t v = 0; v < g.views.size(); ++v) by_name[g.view_names[v]] = v;
  auto at = [&](const std::string& name) {
    REQUIRE_MESSAGE(by_name.count(name), name);
    const SpView& v = g.views[by_name[name]];
    return static_cast<const void*>(bases[v.arena] + sp_view_offset(v));
  };
  REQUIRE(plan.layers.size() == g.params.n_layers);
  for (uint32_t l : {0u, 13u, 27u}) {
    CAPTURE(l);
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const cuda::ClusterLayer& L = plan.layers[l];
    CHECK(L.wq == at(p + "self_attn.q_proj.weight"));
    CHECK(L.wk == at(p + "self_attn.k_proj.weight"));
    CHECK(L.wv == at(p + "self_attn.v_proj.weight"));
    CHECK(L.wo == at(p + "self_attn.o_proj.weight"));
    CHECK(L.wg == at(p + "mlp.gate_proj.weight"));
    CHECK(L.wu == at(p + "mlp.up_proj.weight"));
    CHECK(L.wd == at(p + "mlp.down_proj.weight"));
    CHECK(L.in_norm == at(p + "input_layernorm.weight"));
    CHECK(L.post_norm == at(p + "post_attention_layernorm.weight"));
    CHECK(L.q_norm == at(p + "self_attn.q_norm.weight"));
    CHECK(L.k_norm == at(p + "self_attn.k_norm.weight"));
    CHECK(g.tasks[L.attention_task].op == SP_OP_ATTENTION);
    CHECK(g.tasks[L.attention_task].layer == l);
    CHECK(g.tasks[L.mlp_task].op == SP_OP_MLP);
  }
  const cuda::ClusterProgram& c = plan.program;
  CHECK(c.lm_head == at("lm_head.weight"));
  CHECK(c.final_norm == at("model.norm.weight"));
  CHECK(c.embed == at("model.embed_tokens.weight"));
  CHECK(c.mlp_piece == 32);
  CHECK(c.mlp_gangs == 12);
  CHECK(plan.o_stride == g.params.n_heads * g.params.head_dim);
}

TEST_CASE("graphs not built for the cluster program are refused, naming what they lack") {
  struct Case {
    const char* what;
    void (*change)(BuildOptions&);
    const char* says;
  };
  const Case cases[] = {
      {"plain", [](BuildOptions& o) { o = BuildOptions{}; o.context = 128; o.attn_chunks = 8; }, "--tune kv-head-waits=on"},
      {"4 chunks", [](BuildOptions& o) { o.attn_chunks = 4; }, "not 8 (--tune attn-chunks=8)"},
      {"gangs of 16", [](BuildOptions& o) { o.fused_mlp = {96, 16}; }, "MLP gangs of 16"},
      {"o_proj in 2 groups", [](BuildOptions& o) { o.o_proj_split = {8, 4}; }, "one piece a kv head in one group"},
      {"pieces of 96 columns", [](BuildOptions& o) { o.fused_mlp = {32, 8}; }, "the program takes at most 64"},
      {"pieces of 24 columns", [](BuildOptions& o) { o.fused_mlp = {128, 8}; }, "fills whole 16-KiB chunks"},
  };
  for (const Case& k : cases) {
    const std::string what = k.what;
    CAPTURE(what);
    BuildOptions o = qwen06b_build(TwoHop::Cluster);
    k.change(o);
    const Graph g = build_decode_graph(qwen06b_weights(), o);
    const std::string why = cuda::cluster_program_problem(g);
    CAPTURE(why);
    CHECK(why.find(k.says) != std::string::npos);
    CHECK(error_of([&] { cuda::plan_cluster_program(g, std::vector<uint8_t*>(g.arenas.size())); })
              .find("cannot run as the cluster program: " + why) != std::string::npos);
  }
  const Graph tiny = build_tiny({}, {}).graph;  // 2 kv heads
  CHECK(cuda::cluster_program_problem(tiny).find("2 kv heads") != std::string::npos);
  const Graph moe = build_decode_graph(spindle::load_model("synthetic:tiny-moe"), {});
  CHECK(cuda::cluster_program_problem(moe).find("router task: the program runs no MoE layers") != std::string::npos);
}

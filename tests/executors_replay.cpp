// A saved graph, read back and checked against the model (host/replay_check.h), runs as the
// graph built afresh does, bit for bit; a graph built for another model or shape is refused,
// naming what differs.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "host/replay_check.h"
#include "host/safetensors.h"
#include "tasks/graph_file.h"
#include "tests/executors_fixture.h"

using namespace spindle;

namespace {

// `g` written to a .sptg file and read back.
Graph saved_and_read(const Graph& g) {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("spindle-replay-test-" + std::to_string(::getpid()) + ".sptg");
  save_graph(file, g);
  Graph read = load_graph(file);
  std::filesystem::remove(file);
  return read;
}

// The message check_replay throws for `g` on `w`, "(no error)" when it accepts it.
std::string replay_error(const Graph& g, const ModelWeights& w) {
  return error_of([&] { check_replay(g, w); });
}

// The graph's view named `name`.
SpView& view_named(Graph& g, const std::string& name) {
  const auto it = std::find(g.view_names.begin(), g.view_names.end(), name);
  REQUIRE_MESSAGE(it != g.view_names.end(), "the graph has no view '" << name << "'");
  return g.views[size_t(it - g.view_names.begin())];
}

std::string str(uint64_t v) { return std::to_string(v); }

}  // namespace

TEST_CASE("a saved graph replays on every worker count and schedule with the bits of the graph built afresh") {
  const std::vector<uint32_t> prompt = {3, 141, 59};
  BuildOptions plain;
  plain.context = 24;
  BuildOptions two_hop = plain;  // tiling the file must carry: gangs, pieces a kv head, chunks
  two_hop.attn_chunks = 3;
  two_hop.o_proj_split = {2, 0};
  two_hop.fused_mlp = {16, 4};
  two_hop.kv_head_waits = true;
  struct Case {
    const char* model;
    BuildOptions build;
  };
  BuildOptions shared_split = plain;  // the MoE record's shared split, the tiling's, differs from the model's
  shared_split.shared_down_split = {2, 2};
  std::vector<Case> cases = {{"synthetic:tiny", plain},
                             {"synthetic:tiny", two_hop},
                             {"synthetic:tiny-moe", plain},
                             {"synthetic:tiny-qwen3.5-moe", shared_split}};
  for (const char* hybrid : kHybridPresets) cases.push_back({hybrid, plain});
  for (const Case& c : cases) {
    CAPTURE(c.model);
    CAPTURE(c.build.kv_head_waits);
    const ModelWeights w = load_model(c.model);
    const Graph fresh = build_decode_graph(w, c.build);
    const Graph replayed = saved_and_read(fresh);
    CHECK(replay_error(replayed, w) == "(no error)");
    check_threaded_gives(run_decode(fresh, w, {ExecutorKind::Sequential}, prompt, 6), replayed, w, prompt, 6);
  }
}

TEST_CASE("a saved graph runs with the weights it is given: another seed's, of the same shapes") {
  BuildOptions o;
  o.context = 16;
  const ModelWeights tiny = load_model("synthetic:tiny"), seeded = load_model("synthetic:tiny@7");
  const Graph replayed = saved_and_read(build_decode_graph(tiny, o));
  REQUIRE(replay_error(replayed, seeded) == "(no error)");
  const std::vector<uint32_t> prompt = {3, 141, 59};
  const ExecutorOptions opt{ExecutorKind::Sequential};
  const Decoded got = run_decode(replayed, seeded, opt, prompt, 8);
  check_same(got, run_decode(build_decode_graph(seeded, o), seeded, opt, prompt, 8));
  CHECK(got.tokens != run_decode(replayed, tiny, opt, prompt, 8).tokens);
}

TEST_CASE("a graph built for another model or shape is refused, naming both values") {
  BuildOptions o;
  o.context = 16;
  const ModelWeights tiny = load_model("synthetic:tiny", {.fill_host = false});
  const Graph tiny_graph = saved_and_read(build_decode_graph(tiny, o));

  SUBCASE("another shape: qwen3-0.6b's") {
    const ModelWeights q = load_model("synthetic:qwen3-0.6b", {.fill_host = false});
    CHECK(replay_error(tiny_graph, q) ==
          "the graph's hidden is " + str(tiny.config.hidden) + ", the model's " + str(q.config.hidden));
  }
  SUBCASE("another model of the same dimensions: the MoE's weight arena") {
    const ModelWeights moe = load_model("synthetic:tiny-moe", {.fill_host = false});
    CHECK(replay_error(tiny_graph, moe) ==
          "the graph's weight arena 0 is 'weights:synthetic' of " + str(tiny.arenas[0].bytes) +
              " bytes, the model's 'weights:synthetic' of " + str(moe.arenas[0].bytes) + " bytes");
  }
  SUBCASE("another family with weight arenas of the same size: a tensor the model does not have") {
    const ModelWeights qwen35 = load_model("synthetic:tiny-qwen3.5-moe", {.fill_host = false});
    const ModelWeights next = load_model("synthetic:tiny-qwen3-next", {.fill_host = false});
    REQUIRE(qwen35.arenas[0].bytes == next.arenas[0].bytes);
    const std::string e = replay_error(saved_and_read(build_decode_graph(qwen35, o)), next);
    CHECK(e.starts_with("the graph's weight view 'model.layers.0.linear_attn.in_proj_qkv.weight' ("));
    CHECK(e.ends_with(") names no tensor of the model"));
  }
  SUBCASE("a context past the model's max_position_embeddings") {
    ModelWeights shorter = tiny;
    shorter.config.max_position = 8;
    CHECK(replay_error(tiny_graph, shorter) ==
          "the graph's context is 16 positions, more than the model's 8 (max_position_embeddings)");
  }
  SUBCASE("another rms_eps") {
    Graph g = tiny_graph;
    g.params.rms_eps = 0.25f;
    CHECK(replay_error(g, tiny) == "the graph's rms_eps is 0.25, the model's 9.99999997e-07");
  }
}

TEST_CASE("a graph whose weight views leave their tensors, or whose model state differs, is refused though valid") {
  BuildOptions o;
  o.context = 16;
  o.o_proj_split = {2, 0};
  o.kv_head_waits = true;  // o_proj's columns a kv head: views of parts of a tensor
  const ModelWeights w = load_model("synthetic:tiny", {.fill_host = false});
  const Graph built = build_decode_graph(w, o);
  Graph g = built;
  const std::string q_proj = "model.layers.0.self_attn.q_proj.weight";
  const std::string o_proj = "model.layers.0.self_attn.o_proj.weight";
  // "the model's tensor 'NAME' ([R,C] bf16 at byte B of arena 'weights:synthetic')"
  const auto tensor = [&](const std::string& name) {
    const TensorRef& t = w.tensors.at(name);
    return "the model's tensor '" + name + "' (" + shape_string(t.shape) + " bf16 at byte " + str(t.offset) +
           " of arena 'weights:synthetic')";
  };
  const auto refused = [&](const std::string& view, const std::string& why) {
    REQUIRE_NOTHROW(validate(g));
    const std::string e = replay_error(g, w);
    CAPTURE(e);
    CHECK(e.starts_with("the graph's weight view '" + view + "' ("));
    CHECK(e.ends_with(why));
  };

  SUBCASE("a whole tensor's view a row longer") {
    view_named(g, q_proj).rows += 1;
    refused(q_proj, ") is not within " + tensor(q_proj));
  }
  SUBCASE("a whole tensor's view a row shorter (o_proj's, which its parts' tasks read instead)") {
    view_named(g, o_proj).rows -= 1;
    refused(o_proj, ") is not " + tensor(o_proj));
  }
  SUBCASE("a part's columns past its tensor's row") {
    SpView& v = view_named(g, o_proj + ".kv0");
    const uint64_t row = w.tensors.at(o_proj).shape.back();
    const uint64_t at = sp_view_offset(v) + 2 * (row - v.cols + 1);  // its last column one past the row's end
    v.offset_lo = uint32_t(at);
    v.offset_hi = uint32_t(at >> 32);
    refused(o_proj + ".kv0", ") is not within " + tensor(o_proj));
  }
  SUBCASE("a view named for no tensor") {
    for (size_t i = 0; i < g.views.size(); ++i)
      if (g.view_names[i] == "model.norm.weight") g.view_names[i] = "model.final_norm.weight";
    refused("model.final_norm.weight", ") names no tensor of the model");
  }
  SUBCASE("a weight view that is not bf16") {
    g.views.push_back(view_named(g, "model.norm.weight"));
    g.views.back().dtype = SP_F32;
    g.views.back().cols /= 2;
    g.view_names.push_back("model.norm.weight");
    refused("model.norm.weight", ") is not bf16, as every weight is");
  }
  SUBCASE("two layers' KV caches swapped") {
    SpView &l0 = view_named(g, "L0.kv_cache"), &l1 = view_named(g, "L1.kv_cache");
    std::swap(l0.offset_lo, l1.offset_lo);
    std::swap(l0.offset_hi, l1.offset_hi);
    REQUIRE_NOTHROW(validate(g));
    const std::string e = replay_error(g, w);
    CAPTURE(e);
    CHECK(e.starts_with("the graph lays out the state the model keeps (token arrays, KV cache, RoPE table, recurrent "
                        "state) otherwise: the graph has view 'L0.kv_cache' ("));
    CHECK(e.find(" at byte " + str(sp_view_offset(view_named(g, "L0.kv_cache"))) +
                 " of arena 'kv') where the model has view 'L0.kv_cache' (") != std::string::npos);
    CHECK(e.ends_with(" at byte 0 of arena 'kv')"));
  }
  SUBCASE("a larger KV arena") {
    g.arenas[SP_ARENA_KV].bytes += 256;
    REQUIRE_NOTHROW(validate(g));
    CHECK(replay_error(g, w) == "the graph's arena 'kv' has " + str(built.arenas[SP_ARENA_KV].bytes + 256) +
                                    " bytes, the model's " + str(built.arenas[SP_ARENA_KV].bytes));
  }
}

TEST_CASE("an MoE graph with another routing record is refused") {
  BuildOptions o;
  o.context = 16;
  const ModelWeights w = load_model("synthetic:tiny-moe", {.fill_host = false});
  Graph g = build_decode_graph(w, o);
  REQUIRE(g.op_params.size() == 1);
  g.op_params[0].word[3] = 0;  // flags: the top k weights as they are, where the preset renormalises them
  REQUIRE_NOTHROW(validate(g));
  CHECK(replay_error(g, w) ==
        "the graph's op parameter record 0 is {8, 2, 32, 0, 0, 0, 0, 0}, the model's {8, 2, 32, 1, 0, 0, 0, 0} "
        "(tasks/op_params.h)");
}

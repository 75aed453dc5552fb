// The graph builder's sizes from hostile configs and options: each is computed in 64 bits and
// refused, naming the fields and options, before it is narrowed into a 32-bit view or task
// field, and before anything is allocated for it.
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "host/decode.h"
#include "host/executor.h"
#include "host/graph_builder.h"
#include "host/synthetic.h"
#include "loader_fixture.h"

using namespace spindle;
using json = nlohmann::json;

namespace {

// Weights with a config and no tensors: the size checks must fire before any tensor is looked
// up, so a test of them needs none (and allocates nothing).
ModelWeights config_only(uint32_t heads, uint32_t kv_heads, uint32_t head_dim, uint32_t vocab,
                         uint32_t max_position) {
  const json j = {{"model_type", "qwen3"},          {"hidden_size", 4096},
                  {"num_hidden_layers", 2},         {"num_attention_heads", heads},
                  {"num_key_value_heads", kv_heads}, {"head_dim", head_dim},
                  {"intermediate_size", 1024},      {"vocab_size", vocab},
                  {"max_position_embeddings", max_position}};
  ModelWeights w;
  w.source = "hostile";
  w.config = parse_config(j, "hostile/config.json");
  return w;
}

const SpTask& only_task(const Graph& g, const std::string& stage) {
  const SpTask* found = nullptr;
  for (const SpTask& t : g.tasks)
    if (g.counter_names[t.signal_counter] == stage) {
      REQUIRE(found == nullptr);
      found = &t;
    }
  REQUIRE(found != nullptr);
  return *found;
}

struct Decoded {
  std::vector<uint32_t> tokens;
  std::vector<float> logits;
};

Decoded decode_sequential(const Graph& g, const ModelWeights& w) {
  ExecutorOptions opt;
  opt.kind = ExecutorKind::Sequential;
  auto ex = make_executor(g, w, opt);
  Decoded d{decode(*ex, g, {1, 2, 3}, 4, {}).tokens, {}};
  d.logits.assign(ex->logits().begin(), ex->logits().end());
  return d;
}

}  // namespace

TEST_CASE("a rows_per_tile near 2^32 is one task a stage and one argmax slot, not zero slots") {
  const ModelWeights w = make_synthetic("tiny");
  BuildOptions huge;
  huge.rows_per_tile = std::numeric_limits<uint32_t>::max();
  const Graph g = build_decode_graph(w, huge);
  const SpTask& lm = only_task(g, "lm_head");
  CHECK(lm.tile_begin == 0);
  CHECK(lm.tile_end == w.config.vocab);
  CHECK(only_task(g, "sample").operand[2] == 1);  // argmax slots
  // The LM head writes its one partial inside the argmax view, so the tokens are the default tiling's.
  const Decoded got = decode_sequential(g, w);
  const Graph reference = build_decode_graph(w, {});
  const Decoded expect = decode_sequential(reference, w);
  CHECK(got.tokens == expect.tokens);
  REQUIRE(got.logits.size() == expect.logits.size());
  CHECK(std::memcmp(got.logits.data(), expect.logits.data(), got.logits.size() * sizeof(float)) == 0);
}

TEST_CASE("rows_per_task_for and attn_chunks_for_context do not wrap near 2^32") {
  CHECK(rows_per_task_for(std::numeric_limits<uint32_t>::max(), 1) == 0xFFFFFFF8u);
  CHECK(rows_per_task_for(100, 1) == 104);
  CHECK(attn_chunks_for_context(std::numeric_limits<uint32_t>::max(), 1) == 128);
}

TEST_CASE("a KV cache of more rows than a view holds is refused, naming the heads and the context") {
  const ModelWeights w = config_only(1024, 1024, 128, 1024, 1u << 22);
  CHECK_ERROR(build_decode_graph(w, {}),
              "a layer's KV cache rows, 2 × num_key_value_heads (1024) × context (4194304) = 8589934592, more than "
              "the 4294967295 a 32-bit view or task field holds");
  BuildOptions opt;
  opt.context = 1u << 21;  // 2^32 rows: one too many
  CHECK_ERROR(build_decode_graph(w, opt), "context (2097152) = 4294967296, more than the 4294967295");
  opt.context = (1u << 21) - 1;  // fits: the builder gets as far as the (absent) tensors
  CHECK_ERROR(build_decode_graph(w, opt), "hostile: tensor 'model.embed_tokens.weight' missing");
}

TEST_CASE("attention partials of more rows than a view holds are refused, naming the heads and chunks") {
  const ModelWeights w = config_only(1024, 1, 64, 1024, 1u << 23);
  BuildOptions opt;
  opt.attn_chunks = 1u << 23;
  CHECK_ERROR(build_decode_graph(w, opt),
              "the attention partials' rows, num_attention_heads (1024) × attention chunks (8388608) = 8589934592, "
              "more than the 4294967295 a 32-bit view or task field holds");
}

TEST_CASE("more LM head tasks than its 16-bit argmax slots are refused") {
  const ModelWeights w = config_only(32, 8, 128, 1u << 20, 4096);
  BuildOptions opt;
  opt.stage_tasks = 1u << 20;  // 8 rows a task
  CHECK_ERROR(build_decode_graph(w, opt),
              "the LM head's tasks, vocab_size (1048576) / rows per task (8) rounded up = 131072, more than the 65536 "
              "argmax slots its tasks can name (raise rows_per_tile or lower stage_tasks)");
  opt.rows_per_tile = 16;  // 65536 slots: the most there are
  CHECK_ERROR(build_decode_graph(w, opt), "tensor 'model.embed_tokens.weight' missing");
}

TEST_CASE("a stage of more tasks than a graph may have is refused before its tasks are allocated") {
  ModelWeights w = make_synthetic("tiny");
  w.config.max_position = 1u << 22;
  BuildOptions opt;
  opt.context = 1u << 22;
  opt.attn_chunks = 1u << 22;
  CHECK_ERROR(build_decode_graph(w, opt), "the graph's tasks with the 8388608 of stage 'L0.attention' = ");
  CHECK_ERROR(build_decode_graph(w, opt),
              ", more than the 4194304 a graph may have (raise rows_per_tile, or lower stage_tasks or attn_chunks)");
}

TEST_CASE("the builder holds a config built in code, and max_steps, to their limits") {
  ModelWeights w = make_synthetic("tiny");
  w.config.n_layers = 1'000'000'000;
  CHECK_ERROR(build_decode_graph(w, {}), "synthetic:tiny: field 'num_hidden_layers' is too large: 1000000000 (at most 1024)");
  BuildOptions opt;
  opt.context = 16;
  opt.max_steps = 17;
  CHECK_ERROR(build_decode_graph(make_synthetic("tiny"), opt), "max_steps 17 exceeds the context's 16 positions");
}

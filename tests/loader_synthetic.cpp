// Synthetic presets: the spec string, determinism, the value formula, the generation plan,
// unfilled weights, and `synth` output loading back bit-identical.
#include <cmath>
#include <set>

#include "host/checkpoint.h"
#include "host/executor.h"
#include "host/graph_builder.h"
#include "host/synthetic.h"
#include "host/synthetic_values.h"
#include "loader_fixture.h"
#include "ops/bf16.h"

using namespace spindle;

namespace {

std::vector<float> values(const ModelWeights& w, const std::string& name) {
  const TensorRef& ref = w.tensors.at(name);
  std::vector<float> out(ref.elements());
  const uint8_t* p = w.arenas[ref.arena].data + ref.offset;
  for (size_t i = 0; i < out.size(); ++i) {
    bf16 b;
    std::memcpy(&b, p + 2 * i, 2);
    out[i] = bf16_to_f32(b);
  }
  return out;
}

}  // namespace

TEST_CASE("synthetic presets: the list, the real shapes, unknown names") {
  std::vector<std::string> names;
  for (const SyntheticPreset& p : synthetic_presets()) names.push_back(p.name);
  CHECK(names == std::vector<std::string>{"tiny", "tiny-tied", "qwen3-0.6b", "qwen3-8b", "tiny-moe", "qwen3-30b-a3b",
                                          "tiny-qwen3.5", "qwen3.5-0.8b", "qwen3.5-27b", "tiny-qwen3.5-moe",
                                          "qwen3.5-35b-a3b", "tiny-qwen3-next", "qwen3-next-80b-a3b"});

  const ModelConfig& small = synthetic_config("qwen3-0.6b");
  CHECK(small.hidden == 1024);
  CHECK(small.n_layers == 28);
  CHECK(small.n_heads == 16);
  CHECK(small.n_kv_heads == 8);
  CHECK(small.head_dim == 128);
  CHECK(small.intermediate == 3072);
  CHECK(small.vocab == 151936);
  CHECK(small.max_position == 40960);
  CHECK(small.rope_theta == 1e6f);
  CHECK(small.tie_word_embeddings);
  const ModelConfig& big = synthetic_config("qwen3-8b");
  CHECK(big.hidden == 4096);
  CHECK(big.n_layers == 36);
  CHECK(big.intermediate == 12288);
  CHECK_FALSE(big.tie_word_embeddings);
  CHECK(synthetic_config("tiny").rotary_dim() == 16);
  // Qwen3-30B-A3B (spec §9.2): 128 experts of 768 rows, 8 a token, renormalised.
  const ModelConfig& moe = synthetic_config("qwen3-30b-a3b");
  CHECK(moe.family == Family::Qwen3Moe);
  CHECK(moe.hidden == 2048);
  CHECK(moe.n_layers == 48);
  CHECK(moe.n_heads == 32);
  CHECK(moe.n_kv_heads == 4);
  CHECK(moe.head_dim == 128);
  CHECK(moe.num_experts == 128);
  CHECK(moe.experts_per_tok == 8);
  CHECK(moe.moe_intermediate == 768);
  CHECK(moe.norm_topk_prob);
  CHECK(moe.vocab == 151936);
  CHECK_FALSE(moe.tie_word_embeddings);
  // Qwen3.5-0.8B and 27B (spec §9.2): three GDN layers, then gated attention; a quarter of 256
  // rotary.
  const ModelConfig& q35 = synthetic_config("qwen3.5-0.8b");
  CHECK(q35.family == Family::Qwen3_5);
  CHECK(q35.hidden == 1024);
  CHECK(q35.n_layers == 24);
  CHECK(q35.n_heads == 8);
  CHECK(q35.n_kv_heads == 2);
  CHECK(q35.head_dim == 256);
  CHECK(q35.rotary_dim() == 64);
  CHECK(q35.intermediate == 3584);
  CHECK(q35.vocab == 248320);
  CHECK(q35.rope_theta == 1e7f);
  CHECK(q35.tie_word_embeddings);
  CHECK(q35.linear_num_key_heads == 16);
  CHECK(q35.linear_num_value_heads == 16);
  CHECK(q35.linear_key_head_dim == 128);
  CHECK(q35.linear_value_head_dim == 128);
  CHECK(q35.linear_conv_kernel == 4);
  for (uint32_t l = 0; l < q35.n_layers; ++l)
    CHECK(q35.layer_types[l] == (l % 4 == 3 ? LayerType::FullAttention : LayerType::LinearAttention));
  const ModelConfig& q27 = synthetic_config("qwen3.5-27b");
  CHECK(q27.hidden == 5120);
  CHECK(q27.n_layers == 64);
  CHECK(q27.n_heads == 24);
  CHECK(q27.n_kv_heads == 4);
  CHECK(q27.intermediate == 17408);
  CHECK(q27.linear_num_value_heads == 48);
  CHECK_FALSE(q27.tie_word_embeddings);
  // Qwen3.5-35B-A3B and Qwen3-Next-80B-A3B (spec §9.2): routed experts and a shared expert.
  const ModelConfig& a3b = synthetic_config("qwen3.5-35b-a3b");
  CHECK(a3b.family == Family::Qwen3_5Moe);
  CHECK(a3b.hidden == 2048);
  CHECK(a3b.n_layers == 40);
  CHECK(a3b.n_heads == 16);
  CHECK(a3b.n_kv_heads == 2);
  CHECK(a3b.vocab == 248320);
  CHECK(a3b.num_experts == 256);
  CHECK(a3b.experts_per_tok == 8);
  CHECK(a3b.moe_intermediate == 512);
  CHECK(a3b.shared_intermediate == 512);
  CHECK(a3b.linear_num_value_heads == 32);
  CHECK_FALSE(a3b.tie_word_embeddings);
  const ModelConfig& next = synthetic_config("qwen3-next-80b-a3b");
  CHECK(next.family == Family::Qwen3Next);
  CHECK(next.n_layers == 48);
  CHECK(next.vocab == 151936);
  CHECK(next.num_experts == 512);
  CHECK(next.experts_per_tok == 10);
  CHECK(next.norm_topk_prob);

  CHECK_ERROR(synthetic_config("huge"),
              "unknown synthetic preset 'huge' (valid: tiny, tiny-tied, qwen3-0.6b, qwen3-8b, tiny-moe, qwen3-30b-a3b, "
              "tiny-qwen3.5, qwen3.5-0.8b, qwen3.5-27b, tiny-qwen3.5-moe, qwen3.5-35b-a3b, tiny-qwen3-next, "
              "qwen3-next-80b-a3b)");
  CHECK_ERROR(load_model("synthetic:huge"), "unknown synthetic preset 'huge'");
}

TEST_CASE("synthetic spec strings") {
  CHECK(parse_synthetic_spec("synthetic:tiny").preset == "tiny");
  CHECK(parse_synthetic_spec("synthetic:tiny").seed == 0);
  CHECK(parse_synthetic_spec("synthetic:qwen3-8b@42").preset == "qwen3-8b");
  CHECK(parse_synthetic_spec("synthetic:qwen3-8b@42").seed == 42);
  CHECK(parse_synthetic_spec("synthetic:tiny@18446744073709551615").seed == UINT64_MAX);
  for (const char* bad : {"synthetic:tiny@", "synthetic:tiny@x", "synthetic:tiny@-1",
                          "synthetic:tiny@18446744073709551616", "synthetic:tiny@1x"})
    CHECK_ERROR(parse_synthetic_spec(bad), "the seed after '@' must be a decimal integer");
  CHECK_ERROR(parse_synthetic_spec("tiny"), "expected synthetic:PRESET");
  CHECK(load_model("synthetic:tiny@3").source == "synthetic:tiny@3");
  CHECK(load_model("synthetic:tiny@0").source == "synthetic:tiny");
}

TEST_CASE("synthetic weights: every expected tensor, deterministic, seeded") {
  ModelWeights a = make_synthetic("tiny");
  CHECK(a.source == "synthetic:tiny");
  std::vector<TensorSpec> specs = expected_tensors(a.config);
  CHECK(specs.size() == 1 + 11 * 2 + 2);
  CHECK(a.tensors.size() == specs.size());
  uint64_t bytes = 0;
  for (const TensorSpec& t : specs) bytes += a.get(t.name, t.shape).elements() * 2;
  CHECK(a.total_bytes() == bytes);

  CHECK(same_tensors(a, make_synthetic("tiny", 0)));
  ModelWeights b = make_synthetic("tiny", 1);
  for (const TensorSpec& t : specs) CHECK(tensor_bytes(a, t.name) != tensor_bytes(b, t.name));
}

TEST_CASE("synthetic weights: the distributions of the table") {
  ModelWeights w = make_synthetic("tiny");
  auto check_range = [&](const std::string& name, float lo, float hi) {
    std::vector<float> v = values(w, name);
    double sum = 0;
    for (float x : v) {
      CHECK(x >= lo);
      CHECK(x <= hi);
      sum += x;
    }
    return sum / double(v.size());
  };
  float bound = std::sqrt(3.0f / 64.0f) * (1 + 0x1p-8f);  // one bf16 ulp of slack
  double mean = check_range("model.layers.0.mlp.gate_proj.weight", -bound, bound);
  CHECK(std::abs(mean) < 0.01);
  std::vector<float> down = values(w, "model.layers.0.mlp.down_proj.weight");  // in = 128
  double sq = 0;
  for (float x : down) sq += double(x) * x;
  CHECK(std::sqrt(sq / double(down.size())) == doctest::Approx(1 / std::sqrt(128.0)).epsilon(0.05));
  check_range("model.embed_tokens.weight", -1.0f, 1.0f);
  // 1 ± 0.1, and half a bf16 ulp (2^-8 near 1) of rounding
  double norm_mean = check_range("model.layers.1.input_layernorm.weight", 0.89f, 1.11f);
  CHECK(norm_mean == doctest::Approx(1.0).epsilon(0.02));
  check_range("model.layers.1.self_attn.q_norm.weight", 0.89f, 1.11f);
}

TEST_CASE("synthetic values: the formula is pinned") {
  // Published test vectors of FNV-1a-64 and splitmix64.
  CHECK(synth::tensor_key("", 0) == 0xcbf29ce484222325ull);
  CHECK(synth::tensor_key("a", 1) == 0xaf63dc4c8601ec8cull);
  CHECK(synth::splitmix64(0) == 0xe220a8397b1dcdafull);
  // u = (top 24 bits of the hash - 2^23) * 2^-23.
  CHECK(synth::uniform(0, 0, 0) == float(int32_t(0xe220a8397b1dcdafull >> 40) - (1 << 23)) * 0x1p-23f);
  const std::string name = "model.embed_tokens.weight";
  const uint64_t key = synth::tensor_key(name.data(), name.size());
  ModelWeights w = make_synthetic("tiny", 5);
  std::vector<float> v = values(w, name);
  for (uint64_t i : {0, 1, 1000, 32767})
    CHECK(v[i] == bf16_to_f32(synth::value(5, key, i, float(std::sqrt(3.0 / 64)), 0.0f)));  // H = 64
  CHECK(synth::init_for(synth::Role::Projection, 3).scale == 1.0f);
  CHECK(synth::init_for(synth::Role::Norm, 0).offset == 1.0f);
  CHECK(synth::init_for(synth::Role::NormZeroCentred, 0).offset == 0.0f);
}

TEST_CASE("tied presets alias lm_head to the embedding") {
  ModelWeights w = make_synthetic("tiny-tied");
  const TensorRef& head = w.tensors.at("lm_head.weight");
  const TensorRef& embed = w.tensors.at("model.embed_tokens.weight");
  CHECK(head.arena == embed.arena);
  CHECK(head.offset == embed.offset);
  CHECK(w.total_bytes() + 512 * 64 * 2 == make_synthetic("tiny").total_bytes());
}

TEST_CASE("synth: a preset written as an HF checkpoint loads back bit-identical") {
  for (const char* preset : {"tiny", "tiny-tied"}) {
    CAPTURE(preset);
    TempDir dir;
    ModelWeights w = make_synthetic(preset, 9);
    write_hf_checkpoint(w, dir / "out");
    CHECK(std::filesystem::exists(dir / "out" / "config.json"));
    SafetensorsFile file = read_safetensors(dir / "out" / "model.safetensors");
    CHECK(file.tensors.size() == w.tensors.size() - (w.config.tie_word_embeddings ? 1 : 0));
    ModelWeights back = load_model((dir / "out").string());
    CHECK(same_tensors(back, w));
    CHECK(config_to_json(back.config) == config_to_json(w.config));
    CHECK(back.config.model_type == "qwen3");
    CHECK(back.config.tie_word_embeddings == w.config.tie_word_embeddings);
  }
}

namespace {

// The value of slot i of a plan's tensor, as any device must produce it.
bf16 plan_slot(const SyntheticPlan& plan, const SyntheticTensor& t, uint64_t i) {
  return i < t.elements ? synth::value(plan.seed, t.key, i, t.init.scale, t.init.offset) : bf16(0);
}

bf16 arena_slot(const ModelWeights& w, const SyntheticTensor& t, uint64_t i) {
  bf16 b;
  std::memcpy(&b, w.arenas[0].data + t.offset + 2 * i, 2);
  return b;
}

}  // namespace

TEST_CASE("synthetic plan: every tensor once, tiling the arena, as the weights lay them out") {
  for (const SyntheticPreset& preset : synthetic_presets()) {
    CAPTURE(preset.name);
    const SyntheticPlan plan = synthetic_plan(preset.name, 7);
    CHECK(plan.source == "synthetic:" + preset.name + "@7");
    CHECK(plan.seed == 7);
    const bool tied = plan.config.tie_word_embeddings;
    std::set<std::string> expected, planned;
    for (const TensorSpec& t : expected_tensors(plan.config))
      if (!(tied && t.name == "lm_head.weight")) expected.insert(t.name);
    uint64_t at = 0;
    for (const SyntheticTensor& t : plan.tensors) {
      CAPTURE(t.name);
      CHECK(planned.insert(t.name).second);
      CHECK(t.offset == at);
      CHECK(t.offset % 64 == 0);
      CHECK(t.elements == TensorRef{0, 0, t.shape}.elements());
      CHECK(t.span >= t.elements);
      CHECK(t.span - t.elements < 32);  // padding to the next 64 bytes, no more
      CHECK(t.key == synth::tensor_key(t.name.data(), t.name.size()));
      CHECK(t.init.scale > 0);
      at = t.offset + 2 * t.span;
    }
    CHECK(planned == expected);
    CHECK(at == plan.arena_bytes);

    // The weights, filled or not, are laid out by the plan, and their plan is this one.
    const ModelWeights w = make_synthetic(preset.name, 7, SyntheticFill::None);
    REQUIRE(w.arenas.size() == 1);
    CHECK(w.arenas[0].bytes == plan.arena_bytes);
    for (const SyntheticTensor& t : plan.tensors) {
      const TensorRef& ref = w.get(t.name, t.shape);
      CHECK(ref.arena == 0);
      CHECK(ref.offset == t.offset);
    }
    const SyntheticPlan again = synthetic_plan_of(w);
    CHECK(again.source == plan.source);
    CHECK(again.tensors.size() == plan.tensors.size());
  }
  // The embedding's scale is by the hidden size, a projection's by its input size.
  const SyntheticPlan tiny = synthetic_plan("tiny");
  for (const SyntheticTensor& t : tiny.tensors) {
    if (t.name == "model.embed_tokens.weight") CHECK(t.init.scale == float(std::sqrt(3.0 / 64)));
    if (t.name == "model.layers.0.mlp.down_proj.weight") CHECK(t.init.scale == float(std::sqrt(3.0 / 128)));
    if (t.name == "model.norm.weight") CHECK(t.init.offset == 1.0f);
  }
  CHECK_ERROR(synthetic_plan("huge"), "unknown synthetic preset 'huge'");
}

TEST_CASE("synthetic plan: evaluated on the host it gives the filled arena, padding included") {
  for (const char* preset : {"tiny", "tiny-tied"}) {
    for (uint64_t seed : {0ull, 11ull}) {
      CAPTURE(preset);
      CAPTURE(seed);
      const SyntheticPlan plan = synthetic_plan(preset, seed);
      const ModelWeights w = make_synthetic(preset, seed);
      std::vector<uint8_t> bytes(plan.arena_bytes, 0xAB);  // every byte must be written
      for (const SyntheticTensor& t : plan.tensors)
        for (uint64_t i = 0; i < t.span; ++i) {
          const bf16 v = plan_slot(plan, t, i);
          std::memcpy(bytes.data() + t.offset + 2 * i, &v, 2);
        }
      CHECK(std::memcmp(bytes.data(), w.arenas[0].data, bytes.size()) == 0);
    }
  }
  // A real size: the first and last slots of every tensor and a stride through it.
  const SyntheticPlan plan = synthetic_plan("qwen3-0.6b", 3);
  const ModelWeights w = make_synthetic("qwen3-0.6b", 3);
  uint64_t mismatches = 0;
  for (const SyntheticTensor& t : plan.tensors) {
    for (uint64_t i = 0; i < t.span; i += 1 + t.span / 4096)
      mismatches += arena_slot(w, t, i) != plan_slot(plan, t, i);
    for (uint64_t i = t.span - std::min<uint64_t>(t.span, 40); i < t.span; ++i)
      mismatches += arena_slot(w, t, i) != plan_slot(plan, t, i);
  }
  CHECK(mismatches == 0);
}

TEST_CASE("unfilled synthetic weights: sizes and tensors without host bytes, refused by the CPU") {
  const ModelWeights filled = load_model("synthetic:tiny@2");
  const ModelWeights w = load_model("synthetic:tiny@2", LoadOptions{.fill_host = false});
  CHECK(filled.in_host_memory());
  CHECK_FALSE(w.in_host_memory());
  CHECK(w.source == "synthetic:tiny@2");
  REQUIRE(w.arenas.size() == 1);
  CHECK(w.arenas[0].data == nullptr);
  CHECK(w.arenas[0].owner == nullptr);
  CHECK(w.arenas[0].bytes == filled.arenas[0].bytes);
  CHECK(w.total_bytes() == filled.total_bytes());
  TempDir out;
  CHECK_ERROR(write_hf_checkpoint(w, out.path() / "ckpt"), "not in host memory");
  REQUIRE(w.tensors.size() == filled.tensors.size());
  for (const auto& [name, ref] : filled.tensors) {
    const TensorRef& other = w.tensors.at(name);
    CHECK(other.offset == ref.offset);
    CHECK(other.shape == ref.shape);
  }
  // A checkpoint is mapped either way.
  TempDir dir;
  write_hf_checkpoint(filled, dir / "ckpt");
  CHECK(load_model((dir / "ckpt").string(), LoadOptions{.fill_host = false}).in_host_memory());

  // The graph needs only the layout: it is the same graph.
  BuildOptions b;
  b.context = 32;
  const Graph g = build_decode_graph(w, b);
  CHECK(g.arenas.back().bytes == build_decode_graph(filled, b).arenas.back().bytes);
  for (ExecutorKind kind : {ExecutorKind::Sequential, ExecutorKind::SequentialF64, ExecutorKind::Threaded}) {
    CAPTURE(executor_kind_name(kind));
    ExecutorOptions opt;
    opt.kind = kind;
    CHECK_ERROR(make_executor(g, w, opt),
                "cpu executor: the weights of synthetic:tiny@2 are not in host memory (loaded with fill_host = false");
  }
  ExecutorOptions opt;
  opt.kind = ExecutorKind::Sequential;
  CHECK_NOTHROW(make_executor(g, filled, opt));
}

TEST_CASE("synthetic_plan_of refuses weights that are not the preset's layout") {
  ModelWeights w = make_synthetic("tiny", 0, SyntheticFill::None);
  CHECK(synthetic_plan_of(w).tensors.size() == w.tensors.size());
  ModelWeights moved = w;
  moved.tensors.at("model.norm.weight").offset += 64;
  CHECK_ERROR(synthetic_plan_of(moved), "synthetic:tiny: the weights are not laid out as the synthetic preset's plan "
                                        "(tensor 'model.norm.weight')");
  ModelWeights grown = w;
  grown.arenas[0].bytes += 64;
  CHECK_ERROR(synthetic_plan_of(grown), "the plan has one arena of");
  ModelWeights other = w;
  other.source = "/some/checkpoint";
  CHECK_ERROR(synthetic_plan_of(other), "is not a synthetic model");
}

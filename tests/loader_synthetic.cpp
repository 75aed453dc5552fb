// Synthetic presets: the spec string, determinism, the value formula, and `synth` output
// loading back bit-identical.
#include <cmath>

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
  CHECK(names == std::vector<std::string>{"tiny", "tiny-tied", "qwen3-0.6b", "qwen3-8b"});

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

  CHECK_ERROR(synthetic_config("huge"),
              "unknown synthetic preset 'huge' (valid: tiny, tiny-tied, qwen3-0.6b, qwen3-8b)");
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

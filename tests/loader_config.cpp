// config.json parsing for every family, the round trip through config_to_json, and each error.
#include <limits>
#include <nlohmann/json.hpp>

#include "host/model_config.h"
#include "loader_fixture.h"

using namespace spindle;
using json = nlohmann::json;

namespace {

using LT = LayerType;

json qwen3_8b() {
  return json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "torch_dtype": "bfloat16",
    "hidden_size": 4096, "num_hidden_layers": 36, "num_attention_heads": 32,
    "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 12288,
    "vocab_size": 151936, "max_position_embeddings": 40960, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000, "rope_scaling": null, "tie_word_embeddings": false,
    "attention_bias": false, "hidden_act": "silu", "use_sliding_window": false,
    "sliding_window": null, "max_window_layers": 36})");
}

json qwen3_30b_a3b() {
  return json::parse(R"({
    "model_type": "qwen3_moe", "hidden_size": 2048, "num_hidden_layers": 48,
    "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
    "intermediate_size": 6144, "vocab_size": 151936, "max_position_embeddings": 40960,
    "rope_theta": 1000000.0, "num_experts": 128, "num_experts_per_tok": 8,
    "moe_intermediate_size": 768, "norm_topk_prob": true, "decoder_sparse_step": 1,
    "mlp_only_layers": [], "tie_word_embeddings": false})");
}

json qwen3_next_80b() {
  return json::parse(R"({
    "model_type": "qwen3_next", "hidden_size": 2048, "num_hidden_layers": 48,
    "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
    "intermediate_size": 5120, "vocab_size": 151936, "max_position_embeddings": 262144,
    "rope_theta": 10000000, "partial_rotary_factor": 0.25, "full_attention_interval": 4,
    "num_experts": 512, "num_experts_per_tok": 10, "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512, "norm_topk_prob": true,
    "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
    "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4})");
}

// The Qwen3.5-0.8B layout: a vision-language wrapper whose text model sits in text_config.
json qwen3_5_08b() {
  json text = json::parse(R"({
    "model_type": "qwen3_5_text", "hidden_size": 1024, "num_hidden_layers": 8,
    "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
    "intermediate_size": 3584, "vocab_size": 248320, "max_position_embeddings": 262144,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000,
                        "partial_rotary_factor": 0.25, "mrope_interleaved": true,
                        "mrope_section": [11, 11, 10]},
    "layer_types": ["linear_attention", "linear_attention", "linear_attention",
                    "full_attention", "linear_attention", "linear_attention",
                    "linear_attention", "full_attention"],
    "linear_num_key_heads": 16, "linear_num_value_heads": 16, "linear_key_head_dim": 128,
    "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4})");
  return json{{"architectures", {"Qwen3_5ForConditionalGeneration"}},
              {"model_type", "qwen3_5"},
              {"tie_word_embeddings", true},
              {"vision_config", {{"depth", 12}}},
              {"text_config", text}};
}

json qwen3_5_moe_text() {
  return json::parse(R"({
    "model_type": "qwen3_5_moe_text", "hidden_size": 2048, "num_hidden_layers": 40,
    "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
    "vocab_size": 248320, "max_position_embeddings": 262144,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000},
    "num_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512,
    "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
    "linear_value_head_dim": 128})");
}

ModelConfig parse(const json& j) { return parse_config(j, "config.json"); }

// Parses `base` with `key` set to `value` (a null value removes the key).
ModelConfig parse_with(json base, const std::string& key, const json& value) {
  if (value.is_null())
    base.erase(key);
  else
    base[key] = value;
  return parse(base);
}

void check_same(const ModelConfig& a, const ModelConfig& b) {
  CHECK(a.family == b.family);
  CHECK(a.model_type == b.model_type);
  CHECK(a.hidden == b.hidden);
  CHECK(a.n_layers == b.n_layers);
  CHECK(a.n_heads == b.n_heads);
  CHECK(a.n_kv_heads == b.n_kv_heads);
  CHECK(a.head_dim == b.head_dim);
  CHECK(a.intermediate == b.intermediate);
  CHECK(a.vocab == b.vocab);
  CHECK(a.max_position == b.max_position);
  CHECK(a.rms_eps == b.rms_eps);
  CHECK(a.rope_theta == b.rope_theta);
  CHECK(a.partial_rotary_factor == b.partial_rotary_factor);
  CHECK(a.tie_word_embeddings == b.tie_word_embeddings);
  CHECK(a.layer_types == b.layer_types);
  CHECK(a.num_experts == b.num_experts);
  CHECK(a.experts_per_tok == b.experts_per_tok);
  CHECK(a.moe_intermediate == b.moe_intermediate);
  CHECK(a.shared_intermediate == b.shared_intermediate);
  CHECK(a.norm_topk_prob == b.norm_topk_prob);
  CHECK(a.decoder_sparse_step == b.decoder_sparse_step);
  CHECK(a.mlp_only_layers == b.mlp_only_layers);
  CHECK(a.linear_num_key_heads == b.linear_num_key_heads);
  CHECK(a.linear_num_value_heads == b.linear_num_value_heads);
  CHECK(a.linear_key_head_dim == b.linear_key_head_dim);
  CHECK(a.linear_value_head_dim == b.linear_value_head_dim);
  CHECK(a.linear_conv_kernel == b.linear_conv_kernel);
}

}  // namespace

TEST_CASE("qwen3: the Qwen3-8B config") {
  ModelConfig c = parse(qwen3_8b());
  CHECK(c.family == Family::Qwen3);
  CHECK(std::string(family_name(c.family)) == "qwen3");
  CHECK(c.hidden == 4096);
  CHECK(c.n_layers == 36);
  CHECK(c.n_heads == 32);
  CHECK(c.n_kv_heads == 8);
  CHECK(c.head_dim == 128);
  CHECK(c.intermediate == 12288);
  CHECK(c.vocab == 151936);
  CHECK(c.max_position == 40960);
  CHECK(c.rms_eps == 1e-6f);
  CHECK(c.rope_theta == 1e6f);
  CHECK(c.rotary_dim() == 128);
  CHECK_FALSE(c.tie_word_embeddings);
  CHECK(c.layer_types == std::vector<LT>(36, LT::FullAttention));
}

TEST_CASE("qwen3: defaults for absent fields") {
  json j = qwen3_8b();
  for (const char* key : {"head_dim", "rope_theta", "rms_norm_eps", "tie_word_embeddings",
                          "num_key_value_heads", "max_position_embeddings"})
    j.erase(key);
  ModelConfig c = parse(j);
  CHECK(c.head_dim == 4096 / 32);
  CHECK(c.rope_theta == 10000.0f);
  CHECK(c.rms_eps == 1e-6f);
  CHECK_FALSE(c.tie_word_embeddings);
  CHECK(c.n_kv_heads == c.n_heads);
  CHECK(c.max_position == 32768);
  CHECK(c.partial_rotary_factor == 1.0f);
}

TEST_CASE("qwen3: rope_theta inside rope_parameters") {
  ModelConfig c = parse_with(qwen3_8b(), "rope_parameters",
                             {{"rope_type", "default"}, {"rope_theta", 5e5}});
  CHECK(c.rope_theta == 5e5f);  // rope_parameters wins over the legacy top-level field
  json j = qwen3_8b();
  j["rope_parameters"] = {{"rope_type", "default"}};
  CHECK(parse(j).rope_theta == 1e6f);
}

TEST_CASE("qwen3_moe: the Qwen3-30B-A3B config") {
  ModelConfig c = parse(qwen3_30b_a3b());
  CHECK(c.family == Family::Qwen3Moe);
  CHECK(c.num_experts == 128);
  CHECK(c.experts_per_tok == 8);
  CHECK(c.moe_intermediate == 768);
  CHECK(c.shared_intermediate == 0);
  CHECK(c.norm_topk_prob);
  CHECK(c.decoder_sparse_step == 1);
  CHECK(c.mlp_only_layers.empty());
  CHECK(c.intermediate == 6144);
  CHECK(c.rotary_dim() == 128);
  CHECK(c.layer_types == std::vector<LT>(48, LT::FullAttention));
}

TEST_CASE("qwen3_moe: norm_topk_prob defaults to false, mlp_only_layers is read") {
  json j = qwen3_30b_a3b();
  j.erase("norm_topk_prob");
  j["mlp_only_layers"] = {0, 47};
  ModelConfig c = parse(j);
  CHECK_FALSE(c.norm_topk_prob);
  CHECK(c.mlp_only_layers == std::vector<uint32_t>{0, 47});
}

TEST_CASE("qwen3_next: the Qwen3-Next-80B-A3B config") {
  ModelConfig c = parse(qwen3_next_80b());
  CHECK(c.family == Family::Qwen3Next);
  CHECK(c.rotary_dim() == 64);
  CHECK(c.rope_theta == 1e7f);
  CHECK(c.shared_intermediate == 512);
  CHECK(c.num_experts == 512);
  CHECK(c.experts_per_tok == 10);
  CHECK(c.linear_num_key_heads == 16);
  CHECK(c.linear_num_value_heads == 32);
  CHECK(c.linear_key_head_dim == 128);
  CHECK(c.linear_value_head_dim == 128);
  CHECK(c.linear_conv_kernel == 4);
  REQUIRE(c.layer_types.size() == 48);
  for (uint32_t l = 0; l < 48; ++l)
    CHECK(c.layer_types[l] == ((l + 1) % 4 == 0 ? LT::FullAttention : LT::LinearAttention));
}

TEST_CASE("qwen3_next: injected defaults") {
  json j = qwen3_next_80b();
  for (const char* key : {"partial_rotary_factor", "full_attention_interval", "norm_topk_prob",
                          "linear_conv_kernel_dim"})
    j.erase(key);
  ModelConfig c = parse(j);
  CHECK(c.partial_rotary_factor == 0.25f);
  CHECK(c.norm_topk_prob);
  CHECK(c.linear_conv_kernel == 4);
  CHECK(c.layer_types[3] == LT::FullAttention);
  j["full_attention_interval"] = 2;
  c = parse(j);
  CHECK(c.layer_types[0] == LT::LinearAttention);
  CHECK(c.layer_types[1] == LT::FullAttention);
}

TEST_CASE("qwen3_5: the vision-language wrapper reads text_config") {
  ModelConfig c = parse(qwen3_5_08b());
  CHECK(c.family == Family::Qwen3_5);
  CHECK(c.model_type == "qwen3_5_text");
  CHECK(std::string(family_name(c.family)) == "qwen3_5");
  CHECK(c.hidden == 1024);
  CHECK(c.vocab == 248320);
  CHECK(c.intermediate == 3584);
  CHECK(c.rope_theta == 1e7f);
  CHECK(c.rotary_dim() == 64);
  CHECK(c.tie_word_embeddings);  // from the wrapper
  CHECK(c.linear_num_value_heads == 16);
  CHECK(c.layer_types[3] == LT::FullAttention);
  CHECK(c.layer_types[4] == LT::LinearAttention);

  json flat = qwen3_5_08b()["text_config"];
  CHECK(parse(flat).family == Family::Qwen3_5);
  json no_type = qwen3_5_08b();
  no_type["text_config"].erase("model_type");
  CHECK(parse(no_type).model_type == "qwen3_5_text");
}

TEST_CASE("qwen3_5_moe: text config, and wrapped") {
  ModelConfig c = parse(qwen3_5_moe_text());
  CHECK(c.family == Family::Qwen3_5Moe);
  CHECK(c.intermediate == 0);
  CHECK(c.norm_topk_prob);
  CHECK(c.num_experts == 256);
  CHECK(c.shared_intermediate == 512);
  CHECK(c.partial_rotary_factor == 0.25f);
  CHECK(c.layer_types[39] == LT::FullAttention);
  json wrapped = {{"model_type", "qwen3_5_moe"}, {"text_config", qwen3_5_moe_text()}};
  check_same(parse(wrapped), c);
}

TEST_CASE("config_to_json reads back identically for every family") {
  for (const json& j :
       {qwen3_8b(), qwen3_30b_a3b(), qwen3_next_80b(), qwen3_5_08b(), qwen3_5_moe_text()}) {
    ModelConfig c = parse(j);
    json written = config_to_json(c);
    CHECK(written["torch_dtype"] == "bfloat16");
    CHECK(written["architectures"].size() == 1);
    check_same(parse(written), c);
  }
  json written = config_to_json(parse(qwen3_8b()));
  CHECK(written["architectures"][0] == "Qwen3ForCausalLM");
  CHECK(written["rms_norm_eps"].get<double>() == 1e-6);
}

TEST_CASE("config errors name the file and the field") {
  const json base = qwen3_8b();
  SUBCASE("zero sizes") {
    for (const char* key : {"hidden_size", "num_hidden_layers", "num_attention_heads",
                            "num_key_value_heads", "head_dim", "vocab_size", "intermediate_size",
                            "max_position_embeddings"})
      CHECK_ERROR(parse_with(base, key, 0), std::string("config.json: ") + key);
  }
  SUBCASE("zero intermediate_size is fine when every layer is MoE") {
    CHECK(parse_with(qwen3_30b_a3b(), "intermediate_size", 0).intermediate == 0);
    json j = qwen3_30b_a3b();
    j["intermediate_size"] = 0;
    j["mlp_only_layers"] = {1};
    CHECK_ERROR(parse(j), "intermediate_size must be greater than 0");
  }
  SUBCASE("heads that do not divide") {
    CHECK_ERROR(parse_with(base, "num_key_value_heads", 5),
                "num_attention_heads (32) is not a multiple of num_key_value_heads (5)");
  }
  SUBCASE("head_dim absent and not derivable") {
    json j = base;
    j.erase("head_dim");
    j["hidden_size"] = 4000;
    j["num_attention_heads"] = 48;
    j["num_key_value_heads"] = 8;
    CHECK_ERROR(parse(j), "field 'head_dim' is missing");
  }
  SUBCASE("odd rotary dim") {
    json j = base;
    j["head_dim"] = 16;
    j["partial_rotary_factor"] = 0.3125;  // 5
    CHECK_ERROR(parse(j), "rotary dim int(head_dim * partial_rotary_factor) = 5 must be even");
  }
  SUBCASE("rotary dim larger than head_dim") {
    CHECK_ERROR(parse_with(base, "partial_rotary_factor", 1.5),
                "makes the rotary dim larger than head_dim (128)");
  }
  SUBCASE("missing required fields") {
    for (const char* key : {"hidden_size", "num_hidden_layers", "num_attention_heads",
                            "vocab_size", "intermediate_size", "model_type"})
      CHECK_ERROR(parse_with(base, key, nullptr),
                  std::string("config.json: field '") + key + "' is missing");
    CHECK_ERROR(parse_with(qwen3_30b_a3b(), "num_experts", nullptr),
                "field 'num_experts' is missing");
  }
  SUBCASE("the expert count as transformers 5 writes it, num_local_experts") {
    json j = qwen3_30b_a3b();
    j.erase("num_experts");
    j["num_local_experts"] = 128;
    CHECK(parse(j).num_experts == 128);
    CHECK(parse_with(qwen3_30b_a3b(), "num_local_experts", 128).num_experts == 128);
    CHECK_ERROR(parse_with(qwen3_30b_a3b(), "num_local_experts", 64),
                "field 'num_local_experts' = 64 differs from num_experts = 128");
    CHECK_ERROR(parse_with(qwen3_next_80b(), "linear_num_value_heads", nullptr),
                "field 'linear_num_value_heads' is missing");
  }
  SUBCASE("wrong JSON types") {
    CHECK_ERROR(parse_with(base, "hidden_size", "abc"),
                "field 'hidden_size' must be a non-negative integer, got \"abc\"");
    CHECK_ERROR(parse_with(base, "hidden_size", -4096), "must be a non-negative integer, got -4096");
    CHECK_ERROR(parse_with(base, "hidden_size", 4096.5), "must be a non-negative integer");
    CHECK_ERROR(parse_with(base, "vocab_size", uint64_t(1) << 33), "'vocab_size' is too large");
    CHECK_ERROR(parse_with(base, "rope_theta", "big"), "field 'rope_theta' must be a number");
    CHECK_ERROR(parse_with(base, "tie_word_embeddings", "yes"),
                "field 'tie_word_embeddings' must be true or false");
    CHECK_ERROR(parse_with(base, "model_type", 3), "field 'model_type' must be a string");
    CHECK_ERROR(parse_with(base, "layer_types", "full"), "'layer_types' must be an array");
    CHECK_ERROR(parse_with(qwen3_30b_a3b(), "mlp_only_layers", {"a"}),
                "'mlp_only_layers' must be a non-negative integer");
    CHECK_ERROR(parse(json::array()), "config.json: expected a JSON object");
  }
  SUBCASE("unknown model_type") {
    CHECK_ERROR(parse_with(base, "model_type", "llama"),
                "model_type 'llama' is not supported (supported: qwen3 qwen3_moe");
  }
  SUBCASE("layer_types") {
    CHECK_ERROR(parse_with(base, "layer_types", {"full_attention"}),
                "layer_types has 1 entries, expected num_hidden_layers = 36");
    CHECK_ERROR(parse_with(base, "layer_types", json(std::vector<std::string>(36, "linear_attention"))),
                "model_type 'qwen3' has only full_attention layers");
    CHECK_ERROR(parse_with(base, "layer_types", json(std::vector<std::string>(36, "sliding"))),
                "layer_types' has \"sliding\"");
  }
  SUBCASE("unsupported features") {
    CHECK_ERROR(parse_with(base, "rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}),
                "field 'rope_scaling' has rope type \"yarn\", which is not supported");
    CHECK_ERROR(parse_with(base, "use_sliding_window", true), "use_sliding_window");
    CHECK_ERROR(parse_with(base, "attention_bias", true), "attention_bias");
    CHECK_ERROR(parse_with(base, "hidden_act", "gelu"), "hidden_act");
  }
  SUBCASE("MoE and GDN consistency") {
    CHECK_ERROR(parse_with(qwen3_30b_a3b(), "num_experts_per_tok", 129),
                "num_experts_per_tok (129) must be between 1 and num_experts (128)");
    CHECK_ERROR(parse_with(qwen3_30b_a3b(), "num_experts_per_tok", 0),
                "num_experts_per_tok (0) must be between 1 and num_experts (128)");
    CHECK_ERROR(parse_with(qwen3_30b_a3b(), "mlp_only_layers", {48}),
                "mlp_only_layers names layer 48");
    CHECK_ERROR(parse_with(qwen3_next_80b(), "linear_num_value_heads", 24),
                "linear_num_value_heads (24) is not a multiple of linear_num_key_heads (16)");
    // The GDN op's conv keeps at most 8 taps (tasks/op_decls.h kMaxConvKernel).
    CHECK_ERROR(parse_with(qwen3_next_80b(), "linear_conv_kernel_dim", 9),
                "field 'linear_conv_kernel_dim' is too large: 9 (at most 8)");
  }
  SUBCASE("the VL wrapper needs text_config, and errors say so") {
    json j = qwen3_5_08b();
    j.erase("text_config");
    CHECK_ERROR(parse(j), "field 'text_config' is missing");
    j = qwen3_5_08b();
    j["text_config"]["hidden_size"] = "x";
    CHECK_ERROR(parse(j), "config.json (text_config): field 'hidden_size'");
  }
}

TEST_CASE("load_config: missing file and bad JSON name the path") {
  TempDir dir;
  CHECK_ERROR(load_config(dir / "config.json"), (dir / "config.json").string() + ": cannot open");
  write_file(dir / "config.json", "{\"model_type\": \"qwen3\",");
  CHECK_ERROR(load_config(dir / "config.json"), (dir / "config.json").string() + ": not valid JSON");
  write_file(dir / "config.json", qwen3_8b().dump());
  CHECK(load_config(dir / "config.json").hidden == 4096);
  json bad = qwen3_8b();
  bad["hidden_size"] = "abc";
  write_file(dir / "config.json", bad.dump());
  CHECK_ERROR(load_config(dir / "config.json"),
              (dir / "config.json").string() + ": field 'hidden_size'");
}

TEST_CASE("config floats must be finite in fp32, and positive where that is meaningful") {
  const json base = qwen3_8b();
  // Finite as JSON doubles, infinite or zero as the fp32 the engine keeps.
  CHECK_ERROR(parse_with(base, "rms_norm_eps", 1e300),
              "config.json: field 'rms_norm_eps' = 1e+300 is out of fp32 range (it would be infinite)");
  CHECK_ERROR(parse_with(base, "rms_norm_eps", 1e-50), "config.json: field 'rms_norm_eps' = 1e-50 rounds to 0 in fp32");
  CHECK_ERROR(parse_with(base, "rope_theta", 1e39), "field 'rope_theta' = 1e+39 is out of fp32 range");
  CHECK_ERROR(parse_with(base, "rope_theta", -3.5e38), "field 'rope_theta' = -3.5e+38 is out of fp32 range");
  json nested = base;
  nested["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e100}};
  CHECK_ERROR(parse(nested), "field 'rope_theta' = 1e+100 is out of fp32 range");
  CHECK_ERROR(parse_with(base, "rms_norm_eps", 0), "config.json: rms_norm_eps (0) must be a finite number greater than 0");
  CHECK_ERROR(parse_with(base, "rms_norm_eps", -1e-6), "rms_norm_eps (-1e-06) must be a finite number greater than 0");
  CHECK_ERROR(parse_with(base, "rope_theta", -10000), "rope_theta (-10000) must be a finite number greater than 0");
  CHECK_ERROR(parse_with(base, "partial_rotary_factor", 0), "partial_rotary_factor (0) must be a finite number");
  // The largest fp32 and the smallest subnormal are values, and read back as themselves.
  ModelConfig edge = parse_with(base, "rope_theta", 3.4028235e38);
  CHECK(edge.rope_theta == std::numeric_limits<float>::max());
  check_same(parse(config_to_json(edge)), edge);
  ModelConfig tiny_eps = parse_with(base, "rms_norm_eps", 1.5e-45);
  CHECK(tiny_eps.rms_eps == std::numeric_limits<float>::denorm_min());
  check_same(parse(config_to_json(tiny_eps)), tiny_eps);
}

TEST_CASE("config integers past their limits are refused as they are read") {
  const json base = qwen3_8b();
  // A billion layers was a minute of allocation before std::bad_alloc.
  CHECK_ERROR(parse_with(base, "num_hidden_layers", 1'000'000'000),
              "config.json: field 'num_hidden_layers' is too large: 1000000000 (at most 1024)");
  CHECK(parse_with(base, "num_hidden_layers", 1024).layer_types.size() == 1024);
  CHECK_ERROR(parse_with(base, "hidden_size", 65537), "field 'hidden_size' is too large: 65537 (at most 65536)");
  CHECK_ERROR(parse_with(base, "vocab_size", (1 << 24) + 1), "field 'vocab_size' is too large: 16777217 (at most 16777216)");
  CHECK_ERROR(parse_with(base, "max_position_embeddings", uint64_t(1) << 40),
              "field 'max_position_embeddings' is too large: 1099511627776 (at most 67108864)");
  struct Case {
    json config;
    const char* key;
  };
  const Case cases[] = {
      {base, "num_attention_heads"},           {base, "num_key_value_heads"},
      {base, "head_dim"},                      {base, "intermediate_size"},
      {qwen3_30b_a3b(), "num_experts"},        {qwen3_30b_a3b(), "num_experts_per_tok"},
      {qwen3_30b_a3b(), "moe_intermediate_size"}, {qwen3_30b_a3b(), "decoder_sparse_step"},
      {qwen3_next_80b(), "shared_expert_intermediate_size"}, {qwen3_next_80b(), "linear_num_key_heads"},
      {qwen3_next_80b(), "linear_num_value_heads"}, {qwen3_next_80b(), "linear_key_head_dim"},
      {qwen3_next_80b(), "linear_value_head_dim"}, {qwen3_next_80b(), "linear_conv_kernel_dim"},
      {qwen3_next_80b(), "full_attention_interval"},
  };
  for (const Case& c : cases)
    CHECK_ERROR(parse_with(c.config, c.key, uint64_t(1) << 31),
                std::string("field '") + c.key + "' is too large: 2147483648 (at most ");
  CHECK_ERROR(parse_with(qwen3_30b_a3b(), "mlp_only_layers", {1, 5000}),
              "field 'mlp_only_layers' is too large: 5000 (at most 1024)");
}

TEST_CASE("validate holds a config built in code to the same limits") {
  ModelConfig c = parse(qwen3_8b());
  c.n_layers = 1'000'000'000;
  CHECK_ERROR(validate(c, "built"), "built: field 'num_hidden_layers' is too large: 1000000000 (at most 1024)");
  c = parse(qwen3_8b());
  c.n_kv_heads = 4096;
  CHECK_ERROR(validate(c, "built"), "field 'num_key_value_heads' is too large: 4096 (at most 1024)");
  c = parse(qwen3_8b());
  c.rms_eps = std::numeric_limits<float>::infinity();
  CHECK_ERROR(validate(c, "built"), "built: rms_norm_eps (inf) must be a finite number greater than 0");
  c.rms_eps = std::numeric_limits<float>::quiet_NaN();
  CHECK_ERROR(validate(c, "built"), "rms_norm_eps (nan) must be a finite number greater than 0");
}

TEST_CASE("load_config: a directory or a device is named in plain words") {
  TempDir dir;
  CHECK_ERROR(load_config(dir.path()),
              dir.path().string() + ": cannot open the model config: it is a directory, not a file");
  CHECK_ERROR(load_config("/dev/null"), "/dev/null: cannot open the model config: it is a character device");
}

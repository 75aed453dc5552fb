// config.json → ModelConfig, following the v5 transformers config classes (spec §0, §2, §9.1):
// fields absent from the file take the class default where every release agrees on one, and
// are required otherwise. A JSON null counts as absent, as HF treats None.
#include "host/model_config.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <nlohmann/json.hpp>

#include "host/files.h"
#include "tasks/error.h"
#include "tasks/op_decls.h"

namespace spindle {
namespace {

using json = nlohmann::json;

struct FamilyInfo {
  Family family;
  const char* name;          // as DESIGN.md names the families
  const char* model_type;    // the text model's type, as config_to_json writes it
  const char* architecture;  // the text-only CausalLM class
};

constexpr FamilyInfo kFamilies[] = {
    {Family::Qwen3, "qwen3", "qwen3", "Qwen3ForCausalLM"},
    {Family::Qwen3Moe, "qwen3_moe", "qwen3_moe", "Qwen3MoeForCausalLM"},
    {Family::Qwen3Next, "qwen3_next", "qwen3_next", "Qwen3NextForCausalLM"},
    {Family::Qwen3_5, "qwen3_5", "qwen3_5_text", "Qwen3_5ForCausalLM"},
    {Family::Qwen3_5Moe, "qwen3_5_moe", "qwen3_5_moe_text", "Qwen3_5MoeForCausalLM"},
};

// The released Qwen3.5 checkpoints are vision-language wrappers whose text model sits in
// `text_config`.
struct VlWrapper {
  const char* model_type;
  const char* text_model_type;
};
constexpr VlWrapper kVlWrappers[] = {{"qwen3_5", "qwen3_5_text"},
                                     {"qwen3_5_moe", "qwen3_5_moe_text"}};

const FamilyInfo& family_info(Family f) {
  for (const FamilyInfo& info : kFamilies)
    if (info.family == f) return info;
  throw Error("unknown model family");
}

bool is_moe(Family f) {
  return f == Family::Qwen3Moe || f == Family::Qwen3Next || f == Family::Qwen3_5Moe;
}
// qwen3_5_moe has no dense layers and no decoder_sparse_step / mlp_only_layers /
// norm_topk_prob fields: every layer is MoE and the router always renormalises.
bool has_sparse_layout_fields(Family f) { return f == Family::Qwen3Moe || f == Family::Qwen3Next; }

// Limits on the integer fields, checked as each is read (before anything is sized from it: a
// billion layers would otherwise be allocated for) and by validate() for configs built in code.
// None binds a released model; together they keep every size derived from a config
// representable: the rows of a layer's projections within a view's 32-bit rows and columns
// (tasks/view.h), and any tensor's or arena's bytes within 64 bits. The KV cache's rows also
// depend on the context, so the graph builder checks those.
constexpr uint32_t kMaxLayers = 1024;            // the deepest released Qwen has 94
constexpr uint32_t kMaxHidden = 1u << 16;        // the widest released models have 16384
constexpr uint32_t kMaxHeads = 1024;             // released models have at most 128 q heads
constexpr uint32_t kMaxHeadDim = 1024;           // released models use 64 to 256
constexpr uint32_t kMaxIntermediate = 1u << 20;  // the widest released MLPs have 53248 rows
constexpr uint32_t kMaxVocab = 1u << 24;         // released vocabularies have at most 262144
constexpr uint32_t kMaxPositions = 1u << 26;     // the longest released context is 10M
constexpr uint32_t kMaxExperts = 4096;           // released MoE models have at most 512
static_assert(uint64_t(3) * kMaxHeads * kMaxHeadDim <= UINT32_MAX,
              "a layer's q, k and v rows fit a view's 32-bit columns");
static_assert(uint64_t(kMaxLayers) * kMaxExperts * 3 * kMaxIntermediate * kMaxHidden * 4 < (uint64_t(1) << 63),
              "every layer's experts in fp32, the most weight bytes a config can ask for, fit 64 bits");

struct FieldLimit {
  const char* key;
  uint32_t ModelConfig::*member;  // null for a field ModelConfig does not keep
  uint32_t most;
};
constexpr FieldLimit kFieldLimits[] = {
    {"hidden_size", &ModelConfig::hidden, kMaxHidden},
    {"num_hidden_layers", &ModelConfig::n_layers, kMaxLayers},
    {"num_attention_heads", &ModelConfig::n_heads, kMaxHeads},
    {"num_key_value_heads", &ModelConfig::n_kv_heads, kMaxHeads},
    {"head_dim", &ModelConfig::head_dim, kMaxHeadDim},
    {"intermediate_size", &ModelConfig::intermediate, kMaxIntermediate},
    {"vocab_size", &ModelConfig::vocab, kMaxVocab},
    {"max_position_embeddings", &ModelConfig::max_position, kMaxPositions},
    {"num_experts", &ModelConfig::num_experts, kMaxExperts},
    {"num_local_experts", nullptr, kMaxExperts},
    {"num_experts_per_tok", &ModelConfig::experts_per_tok, kMaxExperts},
    {"moe_intermediate_size", &ModelConfig::moe_intermediate, kMaxIntermediate},
    {"shared_expert_intermediate_size", &ModelConfig::shared_intermediate, kMaxIntermediate},
    {"decoder_sparse_step", &ModelConfig::decoder_sparse_step, kMaxLayers},
    {"linear_num_key_heads", &ModelConfig::linear_num_key_heads, kMaxHeads},
    {"linear_num_value_heads", &ModelConfig::linear_num_value_heads, kMaxHeads},
    {"linear_key_head_dim", &ModelConfig::linear_key_head_dim, kMaxHeadDim},
    {"linear_value_head_dim", &ModelConfig::linear_value_head_dim, kMaxHeadDim},
    {"linear_conv_kernel_dim", &ModelConfig::linear_conv_kernel, kMaxConvKernel},  // the GDN op's most taps
    {"full_attention_interval", nullptr, kMaxLayers},
    {"mlp_only_layers", nullptr, kMaxLayers},
};

void check_limit(const std::string& source, const char* key, uint64_t value) {
  for (const FieldLimit& limit : kFieldLimits) {
    if (std::strcmp(limit.key, key) != 0) continue;
    if (value > limit.most)
      throw Error(source + ": field '" + key + "' is too large: " + std::to_string(value) +
                  " (at most " + std::to_string(limit.most) + ")");
    return;
  }
  throw std::logic_error(std::string("config field '") + key + "' has no limit in kFieldLimits");
}

// Shortest decimal that reads back as the same float, so config.json shows 1e-06, not
// 9.999999974752427e-07, and messages show the value as stored.
std::string float_string(float x) {
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, res.ptr);
}

// The least magnitude a double rounds to infinity from in fp32: FLT_MAX plus half its ulp.
constexpr double kF32Overflow = 0x1.ffffffp+127;

// Reads typed fields of one JSON object; every error names the file and the field.
class Fields {
 public:
  Fields(const json& j, std::string source) : j_(j), source_(std::move(source)) {}

  const json* find(const char* key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  [[noreturn]] void fail(const char* key, const std::string& what) const {
    throw Error(source_ + ": field '" + key + "' " + what);
  }
  [[noreturn]] void wrong_type(const char* key, const json& v, const char* expected) const {
    fail(key, std::string("must be ") + expected + ", got " + v.dump());
  }

  uint32_t u32(const char* key) const {
    const json* v = find(key);
    if (!v) fail(key, "is missing");
    return to_u32(key, *v);
  }
  uint32_t u32(const char* key, uint32_t fallback) const {
    const json* v = find(key);
    return v ? to_u32(key, *v) : fallback;
  }
  float f32(const json& obj, const char* key, float fallback) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return fallback;
    if (!it->is_number()) wrong_type(key, *it, "a number");
    const double x = it->get<double>();
    if (!(std::fabs(x) < kF32Overflow))
      fail(key, "= " + it->dump() + " is out of fp32 range (it would be infinite)");
    const float f = float(x);
    if (f == 0 && x != 0) fail(key, "= " + it->dump() + " rounds to 0 in fp32");
    return f;
  }
  float f32(const char* key, float fallback) const { return f32(j_, key, fallback); }
  bool boolean(const char* key, bool fallback) const {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_boolean()) wrong_type(key, *v, "true or false");
    return v->get<bool>();
  }
  std::string string(const char* key) const {
    const json* v = find(key);
    if (!v) fail(key, "is missing");
    if (!v->is_string()) wrong_type(key, *v, "a string");
    return v->get<std::string>();
  }
  const json* object(const char* key) const {
    const json* v = find(key);
    if (v && !v->is_object()) wrong_type(key, *v, "an object");
    return v;
  }
  std::vector<uint32_t> u32_list(const char* key) const {
    std::vector<uint32_t> out;
    const json* v = find(key);
    if (!v) return out;
    if (!v->is_array()) wrong_type(key, *v, "an array of non-negative integers");
    for (const json& e : *v) out.push_back(to_u32(key, e));
    return out;
  }
  const json* string_list(const char* key) const {
    const json* v = find(key);
    if (!v) return nullptr;
    if (!v->is_array()) wrong_type(key, *v, "an array of strings");
    for (const json& e : *v)
      if (!e.is_string()) wrong_type(key, e, "an array of strings");
    return v;
  }

 private:
  uint32_t to_u32(const char* key, const json& v) const {
    if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0))
      wrong_type(key, v, "a non-negative integer");
    const uint64_t x = v.get<uint64_t>();
    check_limit(source_, key, x);
    return uint32_t(x);
  }

  const json& j_;
  std::string source_;
};

// Features the engine does not implement; rejecting them beats decoding with the wrong maths.
void reject_unsupported(const Fields& f) {
  if (f.boolean("attention_bias", false)) f.fail("attention_bias", "= true is not supported");
  if (f.boolean("use_sliding_window", false))
    f.fail("use_sliding_window", "= true is not supported");
  if (const json* act = f.find("hidden_act"); act && *act != "silu")
    f.fail("hidden_act", "= " + act->dump() + " is not supported (only \"silu\")");
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    const json* rope = f.object(key);
    if (!rope) continue;
    for (const char* type_key : {"rope_type", "type"}) {
      auto it = rope->find(type_key);
      // HF maps the multimodal "mrope" to "default": for text the sections collapse (spec §1.6).
      if (it != rope->end() && *it != "default" && *it != "mrope")
        f.fail(key, "has rope type " + it->dump() + ", which is not supported (only \"default\")");
    }
  }
}

std::vector<LayerType> parse_layer_types(const Fields& f, const ModelConfig& c) {
  std::vector<LayerType> types;
  if (const json* list = f.string_list("layer_types")) {
    for (const json& e : *list) {
      if (e == "full_attention")
        types.push_back(LayerType::FullAttention);
      else if (e == "linear_attention")
        types.push_back(LayerType::LinearAttention);
      else
        f.fail("layer_types", "has " + e.dump() +
                                  " (expected \"full_attention\" or \"linear_attention\")");
    }
    return types;
  }
  if (!is_hybrid(c.family)) return std::vector<LayerType>(c.n_layers, LayerType::FullAttention);
  uint32_t interval = f.u32("full_attention_interval", 4);
  if (interval == 0) f.fail("full_attention_interval", "must be at least 1");
  for (uint32_t l = 0; l < c.n_layers; ++l)
    types.push_back((l + 1) % interval == 0 ? LayerType::FullAttention
                                            : LayerType::LinearAttention);
  return types;
}

ModelConfig parse_text_config(const json& j, const std::string& model_type,
                              const std::string& source) {
  ModelConfig c;
  c.model_type = model_type;
  bool known = false;
  for (const FamilyInfo& info : kFamilies)
    if (model_type == info.model_type) c.family = info.family, known = true;
  if (!known) {
    std::string valid;
    for (const FamilyInfo& info : kFamilies) valid += std::string(" ") + info.model_type;
    for (const VlWrapper& w : kVlWrappers) valid += std::string(" ") + w.model_type;
    throw Error(source + ": model_type '" + model_type + "' is not supported (supported:" +
                valid + ")");
  }

  Fields f(j, source);
  reject_unsupported(f);
  c.hidden = f.u32("hidden_size");
  c.n_layers = f.u32("num_hidden_layers");
  c.n_heads = f.u32("num_attention_heads");
  c.n_kv_heads = f.u32("num_key_value_heads", c.n_heads);
  if (f.find("head_dim")) {
    c.head_dim = f.u32("head_dim");
  } else if (c.n_heads == 0) {
    c.head_dim = 0;  // validate() reports num_attention_heads
  } else if (c.hidden % c.n_heads == 0) {
    c.head_dim = c.hidden / c.n_heads;
  } else {
    f.fail("head_dim", "is missing and hidden_size (" + std::to_string(c.hidden) +
                           ") is not a multiple of num_attention_heads (" +
                           std::to_string(c.n_heads) + ")");
  }
  c.vocab = f.u32("vocab_size");
  c.max_position = f.u32("max_position_embeddings", 32768);
  c.rms_eps = f.f32("rms_norm_eps", 1e-6f);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);

  // θ and the rotary fraction: inside rope_parameters (v5), else top level (legacy; v5 folds
  // those in only where rope_parameters lacks them).
  const json* rope = f.object("rope_parameters");
  float theta = f.f32("rope_theta", 10000.0f);
  float factor = f.f32("partial_rotary_factor", is_hybrid(c.family) ? 0.25f : 1.0f);
  c.rope_theta = rope ? f.f32(*rope, "rope_theta", theta) : theta;
  c.partial_rotary_factor = rope ? f.f32(*rope, "partial_rotary_factor", factor) : factor;
  c.layer_types = parse_layer_types(f, c);

  if (is_moe(c.family)) {
    // transformers 5 writes the expert count of a Qwen3MoeConfig as num_local_experts (its
    // attribute map), the released checkpoints as num_experts: either, and the same when both.
    const bool local = f.find("num_local_experts") != nullptr;
    c.num_experts = local && !f.find("num_experts") ? f.u32("num_local_experts") : f.u32("num_experts");
    if (local && f.u32("num_local_experts") != c.num_experts)
      f.fail("num_local_experts", "= " + std::to_string(f.u32("num_local_experts")) + " differs from num_experts = " +
                                      std::to_string(c.num_experts));
    c.experts_per_tok = f.u32("num_experts_per_tok");
    c.moe_intermediate = f.u32("moe_intermediate_size");
    if (has_shared_expert(c.family)) c.shared_intermediate = f.u32("shared_expert_intermediate_size");
    if (has_sparse_layout_fields(c.family)) {
      c.norm_topk_prob = f.boolean("norm_topk_prob", c.family == Family::Qwen3Next);
      c.decoder_sparse_step = f.u32("decoder_sparse_step", 1);
      c.mlp_only_layers = f.u32_list("mlp_only_layers");
    } else {
      c.norm_topk_prob = true;
    }
  }
  c.intermediate = has_dense_layer(c) ? f.u32("intermediate_size") : f.u32("intermediate_size", 0);

  if (is_hybrid(c.family)) {
    c.linear_num_key_heads = f.u32("linear_num_key_heads");
    c.linear_num_value_heads = f.u32("linear_num_value_heads");
    c.linear_key_head_dim = f.u32("linear_key_head_dim");
    c.linear_value_head_dim = f.u32("linear_value_head_dim");
    c.linear_conv_kernel = f.u32("linear_conv_kernel_dim", 4);
  }
  return c;
}

double json_float(float x) { return std::strtod(float_string(x).c_str(), nullptr); }

void require_positive(uint32_t value, const char* field, const std::string& source) {
  if (value == 0) throw Error(source + ": " + field + " must be greater than 0");
}

// NaN, infinities, zero and negative values are meaningless for an epsilon, a base or a fraction.
void require_positive_finite(float value, const char* field, const std::string& source) {
  if (!(value > 0) || !std::isfinite(value))
    throw Error(source + ": " + field + " (" + float_string(value) +
                ") must be a finite number greater than 0");
}

}  // namespace

bool has_shared_expert(Family f) { return f == Family::Qwen3Next || f == Family::Qwen3_5Moe; }

bool is_hybrid(Family f) {
  return f == Family::Qwen3Next || f == Family::Qwen3_5 || f == Family::Qwen3_5Moe;
}

bool is_moe_layer(const ModelConfig& c, uint32_t l) {
  if (!is_moe(c.family) || c.num_experts == 0) return false;
  if (!has_sparse_layout_fields(c.family)) return true;
  for (uint32_t dense : c.mlp_only_layers)
    if (dense == l) return false;
  return c.decoder_sparse_step > 0 && (l + 1) % c.decoder_sparse_step == 0;
}

bool has_dense_layer(const ModelConfig& c) {
  for (uint32_t l = 0; l < c.n_layers; ++l)
    if (!is_moe_layer(c, l)) return true;
  return false;
}

const char* family_name(Family f) { return family_info(f).name; }

ModelConfig parse_config(const json& j, const std::string& source) {
  if (!j.is_object()) throw Error(source + ": expected a JSON object, got " + j.type_name());
  Fields top(j, source);
  std::string model_type = top.string("model_type");
  ModelConfig c;
  const VlWrapper* wrapper = nullptr;
  for (const VlWrapper& w : kVlWrappers)
    if (model_type == w.model_type) wrapper = &w;
  if (wrapper) {
    const json* text = top.object("text_config");
    if (!text)
      top.fail("text_config", "is missing (model_type '" + model_type +
                                  "' is a vision-language wrapper around its text model)");
    Fields text_fields(*text, source + " (text_config)");
    std::string text_type = text_fields.find("model_type") ? text_fields.string("model_type")
                                                           : wrapper->text_model_type;
    c = parse_text_config(*text, text_type, source + " (text_config)");
    // The wrapper's own tie_word_embeddings is the one HF applies to the LM head.
    c.tie_word_embeddings = top.boolean("tie_word_embeddings", c.tie_word_embeddings);
  } else {
    c = parse_text_config(j, model_type, source);
  }
  validate(c, source);
  return c;
}

ModelConfig load_config(const std::filesystem::path& config_json) {
  return parse_config(read_json_file(config_json, "the model config"), config_json.string());
}

json config_to_json(const ModelConfig& c) {
  const FamilyInfo& info = family_info(c.family);
  json j;
  j["architectures"] = {info.architecture};
  j["model_type"] = info.model_type;
  j["torch_dtype"] = "bfloat16";
  j["dtype"] = "bfloat16";
  j["hidden_act"] = "silu";
  j["hidden_size"] = c.hidden;
  j["num_hidden_layers"] = c.n_layers;
  j["num_attention_heads"] = c.n_heads;
  j["num_key_value_heads"] = c.n_kv_heads;
  j["head_dim"] = c.head_dim;
  if (c.intermediate != 0 || has_dense_layer(c)) j["intermediate_size"] = c.intermediate;
  j["vocab_size"] = c.vocab;
  j["max_position_embeddings"] = c.max_position;
  j["rms_norm_eps"] = json_float(c.rms_eps);
  j["rope_theta"] = json_float(c.rope_theta);
  j["partial_rotary_factor"] = json_float(c.partial_rotary_factor);
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["attention_bias"] = false;
  json& types = j["layer_types"] = json::array();
  for (LayerType t : c.layer_types)
    types.push_back(t == LayerType::FullAttention ? "full_attention" : "linear_attention");
  if (is_moe(c.family)) {
    j["num_experts"] = c.num_experts;
    j["num_experts_per_tok"] = c.experts_per_tok;
    j["moe_intermediate_size"] = c.moe_intermediate;
    if (has_shared_expert(c.family)) j["shared_expert_intermediate_size"] = c.shared_intermediate;
    if (has_sparse_layout_fields(c.family)) {
      j["norm_topk_prob"] = c.norm_topk_prob;
      j["decoder_sparse_step"] = c.decoder_sparse_step;
      j["mlp_only_layers"] = c.mlp_only_layers;
    }
  }
  if (is_hybrid(c.family)) {
    j["linear_num_key_heads"] = c.linear_num_key_heads;
    j["linear_num_value_heads"] = c.linear_num_value_heads;
    j["linear_key_head_dim"] = c.linear_key_head_dim;
    j["linear_value_head_dim"] = c.linear_value_head_dim;
    j["linear_conv_kernel_dim"] = c.linear_conv_kernel;
  }
  return j;
}

void validate(const ModelConfig& c, const std::string& source) {
  for (const FieldLimit& limit : kFieldLimits)
    if (limit.member) check_limit(source, limit.key, c.*limit.member);
  require_positive(c.hidden, "hidden_size", source);
  require_positive(c.n_layers, "num_hidden_layers", source);
  require_positive(c.n_heads, "num_attention_heads", source);
  require_positive(c.n_kv_heads, "num_key_value_heads", source);
  require_positive(c.head_dim, "head_dim", source);
  require_positive(c.vocab, "vocab_size", source);
  require_positive(c.max_position, "max_position_embeddings", source);
  if (has_dense_layer(c)) require_positive(c.intermediate, "intermediate_size", source);
  if (c.n_heads % c.n_kv_heads != 0)
    throw Error(source + ": num_attention_heads (" + std::to_string(c.n_heads) +
                ") is not a multiple of num_key_value_heads (" + std::to_string(c.n_kv_heads) +
                ")");
  require_positive_finite(c.rms_eps, "rms_norm_eps", source);
  require_positive_finite(c.rope_theta, "rope_theta", source);
  require_positive_finite(c.partial_rotary_factor, "partial_rotary_factor", source);
  if (c.partial_rotary_factor > 1)
    throw Error(source + ": partial_rotary_factor (" + float_string(c.partial_rotary_factor) +
                ") makes the rotary dim larger than head_dim (" + std::to_string(c.head_dim) +
                ")");
  if (uint32_t r = c.rotary_dim(); r == 0 || r % 2 != 0)
    throw Error(source + ": the rotary dim int(head_dim * partial_rotary_factor) = " +
                std::to_string(r) + " must be even and greater than 0");

  if (c.layer_types.size() != c.n_layers)
    throw Error(source + ": layer_types has " + std::to_string(c.layer_types.size()) +
                " entries, expected num_hidden_layers = " + std::to_string(c.n_layers));
  if (!is_hybrid(c.family))
    for (LayerType t : c.layer_types)
      if (t != LayerType::FullAttention)
        throw Error(source + ": layer_types: model_type '" + c.model_type +
                    "' has only full_attention layers");

  if (is_moe(c.family)) {
    require_positive(c.num_experts, "num_experts", source);
    require_positive(c.moe_intermediate, "moe_intermediate_size", source);
    if (c.experts_per_tok == 0 || c.experts_per_tok > c.num_experts)
      throw Error(source + ": num_experts_per_tok (" + std::to_string(c.experts_per_tok) +
                  ") must be between 1 and num_experts (" + std::to_string(c.num_experts) + ")");
    if (has_shared_expert(c.family))
      require_positive(c.shared_intermediate, "shared_expert_intermediate_size", source);
    require_positive(c.decoder_sparse_step, "decoder_sparse_step", source);
    for (uint32_t l : c.mlp_only_layers)
      if (l >= c.n_layers)
        throw Error(source + ": mlp_only_layers names layer " + std::to_string(l) +
                    ", but there are only " + std::to_string(c.n_layers));
  }
  if (is_hybrid(c.family)) {
    require_positive(c.linear_num_key_heads, "linear_num_key_heads", source);
    require_positive(c.linear_num_value_heads, "linear_num_value_heads", source);
    require_positive(c.linear_key_head_dim, "linear_key_head_dim", source);
    require_positive(c.linear_value_head_dim, "linear_value_head_dim", source);
    require_positive(c.linear_conv_kernel, "linear_conv_kernel_dim", source);
    if (c.linear_num_value_heads % c.linear_num_key_heads != 0)
      throw Error(source + ": linear_num_value_heads (" +
                  std::to_string(c.linear_num_value_heads) +
                  ") is not a multiple of linear_num_key_heads (" +
                  std::to_string(c.linear_num_key_heads) + ")");
  }
}

}  // namespace spindle

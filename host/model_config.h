// A model's architecture, parsed from a Hugging Face config.json (or a synthetic preset).
// Fields of every family are here so qwen3_moe, qwen3_next, qwen3_5 and qwen3_5_moe slot in;
// the graph builder says which families it can build.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace spindle {

enum class Family { Qwen3, Qwen3Moe, Qwen3Next, Qwen3_5, Qwen3_5Moe };
enum class LayerType { FullAttention, LinearAttention };

struct ModelConfig {
  Family family = Family::Qwen3;
  std::string model_type;       // as in config.json ("qwen3", "qwen3_5_moe_text", …)
  uint32_t hidden = 0;          // H
  uint32_t n_layers = 0;        // L
  uint32_t n_heads = 0;         // Hq
  uint32_t n_kv_heads = 0;      // Hkv
  uint32_t head_dim = 0;        // D
  uint32_t intermediate = 0;    // I (dense MLP)
  uint32_t vocab = 0;           // V
  uint32_t max_position = 0;    // max_position_embeddings
  float rms_eps = 1e-6f;
  float rope_theta = 10000.0f;
  float partial_rotary_factor = 1.0f;
  bool tie_word_embeddings = false;
  std::vector<LayerType> layer_types;  // one per layer
  // MoE (qwen3_moe, qwen3_next, qwen3_5_moe)
  uint32_t num_experts = 0, experts_per_tok = 0, moe_intermediate = 0, shared_intermediate = 0;
  bool norm_topk_prob = false;
  uint32_t decoder_sparse_step = 1;
  std::vector<uint32_t> mlp_only_layers;
  // Gated DeltaNet (qwen3_next, qwen3_5, qwen3_5_moe)
  uint32_t linear_num_key_heads = 0, linear_num_value_heads = 0;
  uint32_t linear_key_head_dim = 0, linear_value_head_dim = 0, linear_conv_kernel = 0;

  uint32_t rotary_dim() const { return uint32_t(head_dim * partial_rotary_factor); }
};

const char* family_name(Family f);

// Whether the family interleaves Gated DeltaNet and gated attention layers, with zero-centred
// RMSNorms (qwen3_next, qwen3_5, qwen3_5_moe).
bool is_hybrid(Family f);
// Whether the family's MoE layers add a shared expert with a sigmoid gate (qwen3_next,
// qwen3_5_moe).
bool has_shared_expert(Family f);

// Whether layer l's feed-forward block is routed experts (spec §2): qwen3_moe and qwen3_next
// unless l is in mlp_only_layers, there are no experts, or (l + 1) is not a multiple of
// decoder_sparse_step; qwen3_5_moe always; the dense families never.
bool is_moe_layer(const ModelConfig& c, uint32_t l);
// Whether some layer has the dense MLP (and so the config needs intermediate_size).
bool has_dense_layer(const ModelConfig& c);

// Parses config.json (for the VL wrappers, its text_config); `source` names the file in
// errors. Throws spindle::Error for unknown model types, missing or mistyped fields, integer
// fields past their limits (checked as each is read, before anything is sized from it), float
// fields that fp32 cannot hold, and inconsistent sizes (zero sizes, heads that do not divide,
// odd rotary dims). validate() makes the same checks on a config built in code.
ModelConfig parse_config(const nlohmann::json& j, const std::string& source);
ModelConfig load_config(const std::filesystem::path& config_json);
nlohmann::json config_to_json(const ModelConfig& c);  // an HF config.json for `synth`
void validate(const ModelConfig& c, const std::string& source);

}  // namespace spindle

// Canonical tensor names (spec §3), declared once for the checkpoint loader, the graph builder
// and the synthetic presets. The loader folds the VL prefix "model.language_model." to "model."
// and fuses per-expert tensors into the fused forms below.
#pragma once
#include <cstdint>
#include <string>

namespace spindle::names {

inline constexpr const char* kEmbed = "model.embed_tokens.weight";
inline constexpr const char* kFinalNorm = "model.norm.weight";
inline constexpr const char* kLmHead = "lm_head.weight";

// Layer l's tensor `suffix` ("model.layers.{l}.{suffix}").
inline std::string layer(uint32_t l, const char* suffix) {
  // Appended, not "…" + std::string: GCC 12 warns falsely (-Wrestrict) on the latter inlined.
  std::string name = "model.layers.";
  name += std::to_string(l);
  name += '.';
  name += suffix;
  return name;
}

inline constexpr const char* kInputNorm = "input_layernorm.weight";
inline constexpr const char* kPostNorm = "post_attention_layernorm.weight";
inline constexpr const char* kQProj = "self_attn.q_proj.weight";
inline constexpr const char* kKProj = "self_attn.k_proj.weight";
inline constexpr const char* kVProj = "self_attn.v_proj.weight";
inline constexpr const char* kOProj = "self_attn.o_proj.weight";
inline constexpr const char* kQNorm = "self_attn.q_norm.weight";
inline constexpr const char* kKNorm = "self_attn.k_norm.weight";
inline constexpr const char* kMlpGate = "mlp.gate_proj.weight";
inline constexpr const char* kMlpUp = "mlp.up_proj.weight";
inline constexpr const char* kMlpDown = "mlp.down_proj.weight";

// Gated DeltaNet (linear attention) layers: Qwen3.5's separate input projections, or
// Qwen3-Next's fused ones (in_proj_qkvz, in_proj_ba: rows grouped per key head, spec §4.1).
inline constexpr const char* kGdnQkv = "linear_attn.in_proj_qkv.weight";
inline constexpr const char* kGdnZ = "linear_attn.in_proj_z.weight";
inline constexpr const char* kGdnB = "linear_attn.in_proj_b.weight";
inline constexpr const char* kGdnA = "linear_attn.in_proj_a.weight";
inline constexpr const char* kGdnQkvz = "linear_attn.in_proj_qkvz.weight";
inline constexpr const char* kGdnBa = "linear_attn.in_proj_ba.weight";
inline constexpr const char* kGdnConv = "linear_attn.conv1d.weight";
inline constexpr const char* kGdnDtBias = "linear_attn.dt_bias";
inline constexpr const char* kGdnALog = "linear_attn.A_log";
inline constexpr const char* kGdnNorm = "linear_attn.norm.weight";
inline constexpr const char* kGdnOut = "linear_attn.out_proj.weight";

// MoE: the router [E, H] and the experts fused as HF holds them, gate_up [E, 2·Im, H] (each
// expert's gate rows, then its up rows) and down [E, H, Im]; no ".weight" suffix.
inline constexpr const char* kRouter = "mlp.gate.weight";
inline constexpr const char* kExpertsGateUp = "mlp.experts.gate_up_proj";
inline constexpr const char* kExpertsDown = "mlp.experts.down_proj";

// The shared expert (qwen3_next, qwen3_5_moe): a SwiGLU MLP of shared_expert_intermediate_size,
// and its gate [1, H].
inline constexpr const char* kSharedGate = "mlp.shared_expert.gate_proj.weight";
inline constexpr const char* kSharedUp = "mlp.shared_expert.up_proj.weight";
inline constexpr const char* kSharedDown = "mlp.shared_expert.down_proj.weight";
inline constexpr const char* kSharedExpertGate = "mlp.shared_expert_gate.weight";

// The per-expert form on disk (fused by the loader): "mlp.experts.{e}.{proj}.weight", proj one
// of gate_proj, up_proj, down_proj.
inline std::string expert(uint32_t l, uint32_t e, const char* proj) {
  std::string name = layer(l, "mlp.experts.");
  name += std::to_string(e);
  name += '.';
  name += proj;
  name += ".weight";
  return name;
}

}  // namespace spindle::names

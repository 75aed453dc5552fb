#include "host/synthetic.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <thread>

#include "host/checkpoint.h"
#include "host/models/tensor_names.h"
#include "host/progress.h"
#include "host/synthetic_values.h"
#include "tasks/error.h"

namespace spindle {
namespace {

constexpr uint64_t kAlign = 64;            // tensor offsets in the arena
constexpr uint64_t kChunk = uint64_t(1) << 20;  // elements per unit of parallel work

ModelConfig qwen3(uint32_t hidden, uint32_t layers, uint32_t heads, uint32_t kv_heads,
                  uint32_t head_dim, uint32_t intermediate, uint32_t vocab, uint32_t max_position,
                  float theta, bool tied) {
  ModelConfig c;
  c.family = Family::Qwen3;
  c.model_type = "qwen3";
  c.hidden = hidden;
  c.n_layers = layers;
  c.n_heads = heads;
  c.n_kv_heads = kv_heads;
  c.head_dim = head_dim;
  c.intermediate = intermediate;
  c.vocab = vocab;
  c.max_position = max_position;
  c.rope_theta = theta;
  c.tie_word_embeddings = tied;
  c.layer_types.assign(layers, LayerType::FullAttention);
  return c;
}

// qwen3_5 (Gated DeltaNet and gated attention, full attention every 4th layer, a dense MLP):
// attention of `heads`/`kv_heads` heads of head_dim, a quarter of it rotary; GDN of key_heads
// and value_heads heads of gdn_dim (keys and values alike), a conv of 4 taps.
ModelConfig qwen3_5(ModelConfig c, uint32_t key_heads, uint32_t value_heads, uint32_t gdn_dim) {
  c.family = Family::Qwen3_5;
  c.model_type = "qwen3_5_text";
  c.partial_rotary_factor = 0.25f;
  for (uint32_t l = 0; l < c.n_layers; ++l)
    c.layer_types[l] = (l + 1) % 4 == 0 ? LayerType::FullAttention : LayerType::LinearAttention;
  c.linear_num_key_heads = key_heads;
  c.linear_num_value_heads = value_heads;
  c.linear_key_head_dim = c.linear_value_head_dim = gdn_dim;
  c.linear_conv_kernel = 4;
  return c;
}

// qwen3 with every layer's MLP replaced by `experts` routed experts of `expert_width`, `top`
// of them a token, their weights renormalised (norm_topk_prob, as the released models have it).
ModelConfig qwen3_moe(ModelConfig c, uint32_t experts, uint32_t top, uint32_t expert_width) {
  c.family = Family::Qwen3Moe;
  c.model_type = "qwen3_moe";
  c.num_experts = experts;
  c.experts_per_tok = top;
  c.moe_intermediate = expert_width;
  c.norm_topk_prob = true;
  return c;
}

// A hybrid config `c` (qwen3_5's layers) with every layer's MLP replaced by `experts` routed
// experts of `expert_width`, `top` of them a token, renormalised, and a gated shared expert of
// `shared_width`: qwen3_5_moe, or with `next` qwen3_next (Qwen3-Next's fused GDN projections).
ModelConfig hybrid_moe(ModelConfig c, bool next, uint32_t experts, uint32_t top, uint32_t expert_width,
                       uint32_t shared_width) {
  c.family = next ? Family::Qwen3Next : Family::Qwen3_5Moe;
  c.model_type = next ? "qwen3_next" : "qwen3_5_moe_text";
  c.num_experts = experts;
  c.experts_per_tok = top;
  c.moe_intermediate = expert_width;
  c.shared_intermediate = shared_width;
  c.norm_topk_prob = true;
  return c;
}

std::vector<SyntheticPreset> make_presets() {
  // Real shapes from spec §9.2; the tiny ones are for tests.
  std::vector<SyntheticPreset> p = {
      {"tiny", qwen3(64, 2, 4, 2, 16, 128, 512, 256, 1e4f, false)},
      {"tiny-tied", qwen3(64, 2, 4, 2, 16, 128, 512, 256, 1e4f, true)},
      {"qwen3-0.6b", qwen3(1024, 28, 16, 8, 128, 3072, 151936, 40960, 1e6f, true)},
      {"qwen3-8b", qwen3(4096, 36, 32, 8, 128, 12288, 151936, 40960, 1e6f, false)},
      {"tiny-moe", qwen3_moe(qwen3(64, 2, 4, 2, 16, 128, 512, 256, 1e4f, false), 8, 2, 32)},
      {"qwen3-30b-a3b", qwen3_moe(qwen3(2048, 48, 32, 4, 128, 6144, 151936, 40960, 1e6f, false), 128, 8, 768)},
      {"tiny-qwen3.5", qwen3_5(qwen3(64, 4, 4, 2, 16, 128, 512, 256, 1e4f, false), 2, 4, 16)},
      {"qwen3.5-0.8b", qwen3_5(qwen3(1024, 24, 8, 2, 256, 3584, 248320, 262144, 1e7f, true), 16, 16, 128)},
      {"qwen3.5-27b", qwen3_5(qwen3(5120, 64, 24, 4, 256, 17408, 248320, 262144, 1e7f, false), 16, 48, 128)},
      {"tiny-qwen3.5-moe",
       hybrid_moe(qwen3_5(qwen3(64, 4, 4, 2, 16, 128, 512, 256, 1e4f, false), 2, 4, 16), false, 8, 2, 32, 32)},
      {"qwen3.5-35b-a3b", hybrid_moe(qwen3_5(qwen3(2048, 40, 16, 2, 256, 0, 248320, 262144, 1e7f, false), 16, 32, 128),
                                     false, 256, 8, 512, 512)},
      {"tiny-qwen3-next",
       hybrid_moe(qwen3_5(qwen3(64, 4, 4, 2, 16, 128, 512, 256, 1e4f, false), 2, 4, 16), true, 8, 2, 32, 32)},
      {"qwen3-next-80b-a3b", hybrid_moe(qwen3_5(qwen3(2048, 48, 16, 2, 256, 5120, 151936, 262144, 1e7f, false), 16, 32,
                                                128),
                                        true, 512, 10, 512, 512)},
  };
  for (const SyntheticPreset& preset : p) validate(preset.config, kSyntheticPrefix + preset.name);
  return p;
}

// The distribution of a tensor, by the table in synthetic_values.h: a router, fused expert or
// conv tensor is a projection over its last dimension; a vector a norm (the GDN's gated norm a
// plain scale in every family), but the GDN's decay parameters.
synth::Init init_of(const TensorSpec& t, Family family) {
  using synth::Role;
  if (t.name == names::kEmbed) return synth::init_for(Role::Embedding, t.shape[1]);
  if (t.name.ends_with(names::kGdnALog)) return synth::init_for(Role::DecayLog, 0);
  if (t.name.ends_with(names::kGdnDtBias)) return synth::init_for(Role::DecayBias, 0);
  if (t.shape.size() == 1) {
    const bool plain = !is_hybrid(family) || t.name.ends_with(names::kGdnNorm);
    return synth::init_for(plain ? Role::Norm : Role::NormZeroCentred, 0);
  }
  return synth::init_for(Role::Projection, t.shape.back());
}

// A run of one tensor's slots [begin, end): values below `elements`, zero padding above. The
// unit the threads share.
struct Job {
  const SyntheticTensor* t;
  uint64_t begin, end;
};

void run_jobs(const std::vector<Job>& jobs, uint64_t seed, uint8_t* arena, ProgressBar& progress) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t j; (j = next.fetch_add(1, std::memory_order_relaxed)) < jobs.size();) {
      const Job& job = jobs[j];
      const SyntheticTensor& t = *job.t;
      bf16* out = reinterpret_cast<bf16*>(arena + t.offset);
      const uint64_t values_end = std::min(job.end, t.elements);
      for (uint64_t i = job.begin; i < values_end; ++i)
        out[i] = synth::value(seed, t.key, i, t.init.scale, t.init.offset);
      for (uint64_t i = std::max(job.begin, t.elements); i < job.end; ++i) out[i] = 0;
      progress.add((job.end - job.begin) * sizeof(bf16));
    }
  };
  size_t n = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), jobs.size());
  std::vector<std::thread> threads;
  for (size_t t = 1; t < n; ++t) threads.emplace_back(worker);
  worker();
  for (std::thread& t : threads) t.join();
}

std::string source_of(const std::string& preset, uint64_t seed) {
  std::string source = kSyntheticPrefix + preset;
  if (seed) source += '@' + std::to_string(seed);
  return source;
}

}  // namespace

const std::vector<SyntheticPreset>& synthetic_presets() {
  static const std::vector<SyntheticPreset> presets = make_presets();
  return presets;
}

const ModelConfig& synthetic_config(const std::string& name) {
  std::string valid;
  for (const SyntheticPreset& p : synthetic_presets()) {
    if (p.name == name) return p.config;
    valid += (valid.empty() ? "" : ", ") + p.name;
  }
  throw Error("unknown synthetic preset '" + name + "' (valid: " + valid + ")");
}

SyntheticSpec parse_synthetic_spec(const std::string& spec) {
  if (!spec.starts_with(kSyntheticPrefix))
    throw Error("'" + spec + "' is not a synthetic model (expected " + kSyntheticPrefix +
                "PRESET or " + kSyntheticPrefix + "PRESET@SEED)");
  std::string rest = spec.substr(std::string(kSyntheticPrefix).size());
  SyntheticSpec s;
  size_t at = rest.find('@');
  s.preset = rest.substr(0, at);
  if (at != std::string::npos) {
    const char* first = rest.data() + at + 1;
    const char* last = rest.data() + rest.size();
    auto [ptr, ec] = std::from_chars(first, last, s.seed);
    if (first == last || ec != std::errc() || ptr != last)
      throw Error("'" + spec + "': the seed after '@' must be a decimal integer below 2^64");
  }
  return s;
}

SyntheticPlan synthetic_plan(const std::string& preset, uint64_t seed) {
  SyntheticPlan plan;
  plan.config = synthetic_config(preset);
  plan.source = source_of(preset, seed);
  plan.seed = seed;
  const std::vector<TensorSpec> specs = expected_tensors(plan.config);
  if (specs.empty())
    throw Error(plan.source + ": synthetic weights for family " + family_name(plan.config.family) +
                " are not described yet");
  for (const TensorSpec& spec : specs) {
    if (plan.config.tie_word_embeddings && spec.name == "lm_head.weight") continue;  // aliased
    SyntheticTensor t;
    t.name = spec.name;
    t.shape = spec.shape;
    t.key = synth::tensor_key(spec.name.data(), spec.name.size());
    t.init = init_of(spec, plan.config.family);
    t.offset = plan.arena_bytes;
    t.elements = TensorRef{0, 0, spec.shape}.elements();
    const uint64_t end = (t.offset + t.elements * sizeof(bf16) + kAlign - 1) / kAlign * kAlign;
    t.span = (end - t.offset) / sizeof(bf16);
    plan.arena_bytes = end;
    plan.tensors.push_back(std::move(t));
  }
  return plan;
}

ModelWeights make_synthetic(const std::string& preset, uint64_t seed, SyntheticFill fill) {
  const SyntheticPlan plan = synthetic_plan(preset, seed);
  ModelWeights w;
  w.config = plan.config;
  w.source = plan.source;
  for (const SyntheticTensor& t : plan.tensors) w.tensors[t.name] = TensorRef{0, t.offset, t.shape};
  if (w.config.tie_word_embeddings) w.tensors["lm_head.weight"] = w.tensors.at("model.embed_tokens.weight");
  if (fill == SyntheticFill::None) {
    w.arenas.push_back({"synthetic", nullptr, nullptr, plan.arena_bytes});
    return w;
  }
  std::shared_ptr<uint8_t[]> buffer(new uint8_t[plan.arena_bytes]);
  w.arenas.push_back({"synthetic", buffer, buffer.get(), plan.arena_bytes});
  std::vector<Job> jobs;
  for (const SyntheticTensor& t : plan.tensors)
    for (uint64_t begin = 0; begin < t.span; begin += kChunk) jobs.push_back({&t, begin, std::min(begin + kChunk, t.span)});
  ProgressBar progress("generating " + w.source, plan.arena_bytes);
  run_jobs(jobs, seed, buffer.get(), progress);
  return w;
}

SyntheticPlan synthetic_plan_of(const ModelWeights& w) {
  const SyntheticSpec spec = parse_synthetic_spec(w.source);
  SyntheticPlan plan = synthetic_plan(spec.preset, spec.seed);
  auto differs = [&](const std::string& what) {
    return Error(w.source + ": the weights are not laid out as the synthetic preset's plan (" + what + ")");
  };
  if (w.arenas.size() != 1 || w.arenas[0].bytes != plan.arena_bytes)
    throw differs("the plan has one arena of " + std::to_string(plan.arena_bytes) + " bytes");
  const size_t aliases = plan.config.tie_word_embeddings ? 1 : 0;
  if (w.tensors.size() != plan.tensors.size() + aliases)
    throw differs(std::to_string(w.tensors.size()) + " tensors, the plan " +
                  std::to_string(plan.tensors.size() + aliases));
  for (const SyntheticTensor& t : plan.tensors) {
    auto it = w.tensors.find(t.name);
    if (it == w.tensors.end() || it->second.arena != 0 || it->second.offset != t.offset || it->second.shape != t.shape)
      throw differs("tensor '" + t.name + "'");
  }
  return plan;
}

}  // namespace spindle

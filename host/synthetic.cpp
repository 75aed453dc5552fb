#include "host/synthetic.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <thread>

#include "host/checkpoint.h"
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

std::vector<SyntheticPreset> make_presets() {
  // Real shapes from spec §9.2; the tiny ones are for tests.
  std::vector<SyntheticPreset> p = {
      {"tiny", qwen3(64, 2, 4, 2, 16, 128, 512, 256, 1e4f, false)},
      {"tiny-tied", qwen3(64, 2, 4, 2, 16, 128, 512, 256, 1e4f, true)},
      {"qwen3-0.6b", qwen3(1024, 28, 16, 8, 128, 3072, 151936, 40960, 1e6f, true)},
      {"qwen3-8b", qwen3(4096, 36, 32, 8, 128, 12288, 151936, 40960, 1e6f, false)},
  };
  for (const SyntheticPreset& preset : p) validate(preset.config, kSyntheticPrefix + preset.name);
  return p;
}

// The distribution of a tensor, by the table in synthetic_values.h. This reading of names
// and shapes covers the qwen3 tensors; GDN and MoE tensors will need their own roles.
synth::Init init_of(const TensorSpec& t, Family family) {
  using synth::Role;
  if (t.name == "model.embed_tokens.weight") return synth::init_for(Role::Embedding, t.shape[1]);
  if (t.shape.size() == 1) {
    bool standard = family == Family::Qwen3 || family == Family::Qwen3Moe;
    return synth::init_for(standard ? Role::Norm : Role::NormZeroCentred, 0);
  }
  return synth::init_for(Role::Projection, t.shape.back());
}

// A run of elements of one tensor: the unit the threads share.
struct Job {
  uint64_t key;
  synth::Init init;
  bf16* out;  // the tensor's first element
  uint64_t begin, end;
};

void run_jobs(const std::vector<Job>& jobs, uint64_t seed) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t j; (j = next.fetch_add(1, std::memory_order_relaxed)) < jobs.size();) {
      const Job& job = jobs[j];
      for (uint64_t i = job.begin; i < job.end; ++i)
        job.out[i] = synth::value(seed, job.key, i, job.init.scale, job.init.offset);
    }
  };
  size_t n = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), jobs.size());
  std::vector<std::thread> threads;
  for (size_t t = 1; t < n; ++t) threads.emplace_back(worker);
  worker();
  for (std::thread& t : threads) t.join();
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

ModelWeights make_synthetic(const std::string& preset, uint64_t seed) {
  ModelWeights w;
  w.config = synthetic_config(preset);
  w.source = kSyntheticPrefix + preset + (seed ? "@" + std::to_string(seed) : "");
  std::vector<TensorSpec> specs = expected_tensors(w.config);
  if (specs.empty())
    throw Error(w.source + ": synthetic weights for family " + family_name(w.config.family) +
                " are not described yet");

  const bool tied = w.config.tie_word_embeddings;
  uint64_t total = 0;
  std::vector<const TensorSpec*> generated;
  for (const TensorSpec& t : specs) {
    if (tied && t.name == "lm_head.weight") continue;  // aliased below
    TensorRef ref{0, total, t.shape};
    total = (total + ref.elements() * sizeof(bf16) + kAlign - 1) / kAlign * kAlign;
    w.tensors[t.name] = std::move(ref);
    generated.push_back(&t);
  }
  std::shared_ptr<uint8_t[]> buffer(new uint8_t[total]);
  w.arenas.push_back({"synthetic", buffer, buffer.get(), total});

  std::vector<Job> jobs;
  for (const TensorSpec* t : generated) {
    const TensorRef& ref = w.tensors.at(t->name);
    Job job{synth::tensor_key(t->name.data(), t->name.size()), init_of(*t, w.config.family),
            reinterpret_cast<bf16*>(buffer.get() + ref.offset), 0, 0};
    for (uint64_t begin = 0; begin < ref.elements(); begin += kChunk) {
      job.begin = begin;
      job.end = std::min(begin + kChunk, ref.elements());
      jobs.push_back(job);
    }
  }
  run_jobs(jobs, seed);
  if (tied) w.tensors["lm_head.weight"] = w.tensors.at("model.embed_tokens.weight");
  return w;
}

}  // namespace spindle

#include "host/model_weights.h"

#include <filesystem>
#include <set>
#include <utility>

#include "host/checkpoint.h"
#include "host/safetensors.h"
#include "host/synthetic.h"
#include "ops/bf16.h"
#include "tasks/error.h"

namespace spindle {

uint64_t TensorRef::elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

const TensorRef& ModelWeights::get(const std::string& name,
                                   const std::vector<uint64_t>& shape) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) throw Error(source + ": tensor '" + name + "' missing");
  if (it->second.shape != shape)
    throw Error(source + ": tensor '" + name + "' has shape " + shape_string(it->second.shape) +
                ", expected " + shape_string(shape));
  return it->second;
}

// Each stored tensor once: a tied lm_head shares the embedding's bytes.
uint64_t ModelWeights::total_bytes() const {
  std::set<std::pair<uint32_t, uint64_t>> seen;
  uint64_t bytes = 0;
  for (const auto& [name, ref] : tensors)
    if (seen.emplace(ref.arena, ref.offset).second) bytes += ref.elements() * sizeof(bf16);
  return bytes;
}

bool ModelWeights::in_host_memory() const {
  for (const HostArena& a : arenas)
    if (!a.data && a.bytes) return false;
  return true;
}

ModelWeights load_model(const std::string& spec, const LoadOptions& opt) {
  if (spec.starts_with(kSyntheticPrefix)) {
    SyntheticSpec s = parse_synthetic_spec(spec);
    return make_synthetic(s.preset, s.seed, opt.fill_host ? SyntheticFill::Host : SyntheticFill::None);
  }
  std::filesystem::path dir(spec);
  std::error_code ec;  // a name the system cannot look at (too long, say) is said as such, not thrown raw
  if (!std::filesystem::exists(dir, ec))
    throw Error("model '" + spec + "': " + (ec ? "cannot be looked at: " + ec.message() : "no such directory") +
                " (expected a checkpoint directory or " + kSyntheticPrefix + "PRESET)");
  return load_checkpoint(dir);
}

}  // namespace spindle

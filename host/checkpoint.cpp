#include "host/checkpoint.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "host/files.h"
#include "host/models/family.h"
#include "host/models/tensor_names.h"
#include "host/progress.h"
#include "host/safetensors.h"
#include "ops/bf16.h"
#include "tasks/error.h"

namespace spindle {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";
constexpr uint64_t kAlign = 64;  // offsets of converted tensors in their arena

uint64_t align_up(uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// The shard files to read and, for a sharded checkpoint, the index's tensor → shard map.
struct Shards {
  std::vector<std::string> files;
  std::map<std::string, std::string> weight_map;
};

// A shard's name in its lexically normal form, so that two spellings of one file are one
// shard. Refuses a name that leaves the checkpoint directory, by its letters ("../x", "/x",
// "sub/../../x") or through a symlink: the index is data, and following it out of the directory
// would map files the checkpoint does not own.
std::string shard_inside(const fs::path& dir, const fs::path& index_path, const std::string& tensor,
                         const std::string& file) {
  auto refuse = [&](const std::string& why) {
    throw Error(index_path.string() + ": tensor '" + tensor + "' is in shard '" + file + "', " + why);
  };
  const fs::path name(file);
  if (name.has_root_path())
    refuse("an absolute path; shards are named relative to the checkpoint directory");
  const fs::path normal = name.lexically_normal();
  if (normal.empty() || normal == "." || *normal.begin() == "..")
    refuse("which is not a file inside the checkpoint directory");
  std::error_code ec;
  const fs::path real_dir = fs::weakly_canonical(dir, ec);
  const fs::path real = ec ? fs::path() : fs::weakly_canonical(dir / name, ec);
  if (ec) refuse("which cannot be resolved: " + ec.message());
  const fs::path inside = real.lexically_relative(real_dir);
  if (inside.empty() || inside == "." || *inside.begin() == "..")
    refuse("which resolves through symlinks to " + real.string() + ", outside the checkpoint directory " +
           real_dir.string());
  return normal.string();
}

Shards find_shards(const fs::path& dir) {
  Shards s;
  // As HF does, a single model.safetensors wins over an index.
  if (fs::exists(dir / kSingleFile)) {
    s.files.push_back(kSingleFile);
    return s;
  }
  fs::path index_path = dir / kIndexFile;
  if (!fs::exists(index_path))
    throw Error(dir.string() + ": no " + kSingleFile + " or " + kIndexFile + " in the directory");
  const json index = read_json_file(index_path, "the shard index");
  auto map = index.find("weight_map");
  if (!index.is_object() || map == index.end() || !map->is_object())
    throw Error(index_path.string() + ": expected a 'weight_map' object (tensor name → shard file)");
  std::set<std::string> files;
  std::map<std::string, std::string> normal;  // each shard name as written → shard_inside's
  for (const auto& [name, file] : map->items()) {
    if (!file.is_string())
      throw Error(index_path.string() + ": weight_map['" + name + "'] must be a file name, got " +
                  file.dump());
    const std::string& written = file.get_ref<const std::string&>();
    auto it = normal.find(written);
    if (it == normal.end()) it = normal.emplace(written, shard_inside(dir, index_path, name, written)).first;
    s.weight_map[name] = it->second;
    files.insert(it->second);
  }
  for (const std::string& file : files)
    if (!fs::exists(dir / file))
      throw Error(index_path.string() + ": shard '" + file + "' is listed but " +
                  (dir / file).string() + " does not exist");
  s.files.assign(files.begin(), files.end());
  return s;
}

// The name the engine uses, or nothing for tensors text decode does not need.
std::optional<std::string> canonical_name(const std::string& name) {
  static const std::string vl_prefix = "model.language_model.";
  if (name.starts_with("mtp.") || name.starts_with("model.visual.")) return std::nullopt;
  if (name.starts_with(vl_prefix)) return "model." + name.substr(vl_prefix.size());
  return name;
}

float f32_from_f16(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return f32_from_bits(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return f32_from_bits(sign | ((exponent + 112) << 23) | (mantissa << 13));
  float v = float(mantissa) * (1.0f / 16777216.0f);  // subnormal: mantissa × 2^-24, exact
  return sign ? -v : v;
}

template <typename T>
T load_unaligned(const uint8_t* base, uint64_t i) {
  T v;
  memcpy(&v, base + i * sizeof(T), sizeof(T));
  return v;
}

// F16 and F32 widen exactly to f32 and round once to bf16. Sources may be unaligned.
void convert_to_bf16(const uint8_t* src, DType dtype, uint64_t n, bf16* dst) {
  if (dtype == DType::BF16) {
    memcpy(dst, src, n * sizeof(bf16));
    return;
  }
  for (uint64_t i = 0; i < n; ++i)
    dst[i] = f32_to_bf16(dtype == DType::F16 ? f32_from_f16(load_unaligned<uint16_t>(src, i))
                                             : load_unaligned<float>(src, i));
}

uint64_t elements(const std::vector<uint64_t>& shape) { return TensorRef{0, 0, shape}.elements(); }

// A tensor as stored: its bytes in a mapped shard (perhaps unaligned), in its dtype.
struct StoredTensor {
  const uint8_t* src;
  DType dtype;
  std::vector<uint64_t> shape;
};

// A tensor that cannot be used in place: not bf16, not 2-byte aligned in its shard, or fused
// from several stored tensors. Its values are its parts', one after another.
struct PendingCopy {
  std::string name;
  std::vector<uint64_t> shape;
  std::vector<StoredTensor> parts;
};

void add_converted_arena(ModelWeights& w, const std::vector<PendingCopy>& copies) {
  if (copies.empty()) return;
  uint32_t arena = uint32_t(w.arenas.size());
  std::vector<TensorRef> refs;
  uint64_t total = 0;
  for (const PendingCopy& c : copies) {
    refs.push_back(TensorRef{arena, total, c.shape});
    total = align_up(total + refs.back().elements() * sizeof(bf16));
  }
  std::shared_ptr<uint8_t[]> buffer(new uint8_t[total]);
  w.arenas.push_back({"converted to bf16", buffer, buffer.get(), total});
  ProgressBar progress("converting " + w.source + " to bf16", total);
  for (size_t i = 0; i < copies.size(); ++i) {
    bf16* dst = reinterpret_cast<bf16*>(buffer.get() + refs[i].offset);
    for (const StoredTensor& part : copies[i].parts) {
      convert_to_bf16(part.src, part.dtype, elements(part.shape), dst);
      dst += elements(part.shape);
      progress.add(elements(part.shape) * sizeof(bf16));
    }
    w.tensors[copies[i].name] = std::move(refs[i]);
  }
}

struct ExpertIndex {
  uint32_t layer, expert;
};

// Layer and expert of a per-expert tensor's name (names::expert), or nothing for any other.
std::optional<ExpertIndex> per_expert_name(const std::string& name) {
  static const std::string layers = "model.layers.", experts = ".mlp.experts.";
  if (!name.starts_with(layers)) return std::nullopt;
  ExpertIndex at{};
  const char* end = name.data() + name.size();
  auto [p, ec] = std::from_chars(name.data() + layers.size(), end, at.layer);
  if (ec != std::errc() || !std::string_view(p, end).starts_with(experts)) return std::nullopt;
  if (std::from_chars(p + experts.size(), end, at.expert).ec != std::errc()) return std::nullopt;
  // Spelled back to reject the digits and projections names::expert would not write.
  for (const char* proj : {"gate_proj", "up_proj", "down_proj"})
    if (name == names::expert(at.layer, at.expert, proj)) return at;
  return std::nullopt;
}

// One layer's per-expert tensors, by name; `experts` is one past the highest expert index.
struct StoredExperts {
  uint64_t experts = 0;
  std::map<std::string, StoredTensor> tensors;
};

void check_expert_count(const ModelWeights& w, uint64_t found, const std::string& where) {
  if (found != w.config.num_experts)
    throw Error(w.source + ": the checkpoint has " + std::to_string(found) + " experts in " + where +
                ", but config.json has num_experts = " + std::to_string(w.config.num_experts));
}

// Layer l's per-expert tensors as the canonical gate_up [E, 2·Im, H] and down [E, H, Im]
// (tensor_names.h): one uniform stride per expert lets a task select a routed expert's rows
// at run time from its index alone. `stored_names` are the canonical names the checkpoint has.
void fuse_experts(const ModelWeights& w, uint32_t l, const StoredExperts& stored,
                  const std::set<std::string>& stored_names, std::vector<PendingCopy>& copies) {
  check_expert_count(w, stored.experts, "layer " + std::to_string(l) + " (" + names::layer(l, "mlp.experts.") +
                                            "0 to ." + std::to_string(stored.experts - 1) + ")");
  const uint64_t E = w.config.num_experts, H = w.config.hidden, Im = w.config.moe_intermediate;
  PendingCopy gate_up{names::layer(l, names::kExpertsGateUp), {E, 2 * Im, H}, {}};
  PendingCopy down{names::layer(l, names::kExpertsDown), {E, H, Im}, {}};
  for (const PendingCopy* fused : {&gate_up, &down})
    if (stored_names.count(fused->name))
      throw Error(w.source + ": layer " + std::to_string(l) + " stores its experts both fused ('" +
                  fused->name + "') and per expert ('" + stored.tensors.begin()->first + "')");
  auto part = [&](uint32_t e, const char* proj, const std::vector<uint64_t>& shape) {
    const std::string name = names::expert(l, e, proj);
    auto it = stored.tensors.find(name);
    if (it == stored.tensors.end()) throw Error(w.source + ": tensor '" + name + "' missing");
    if (it->second.shape != shape)
      throw Error(w.source + ": tensor '" + name + "' has shape " + shape_string(it->second.shape) +
                  ", expected " + shape_string(shape));
    return it->second;
  };
  for (uint32_t e = 0; e < E; ++e) {
    gate_up.parts.push_back(part(e, "gate_proj", {Im, H}));
    gate_up.parts.push_back(part(e, "up_proj", {Im, H}));
    down.parts.push_back(part(e, "down_proj", {H, Im}));
  }
  copies.push_back(std::move(gate_up));
  copies.push_back(std::move(down));
}

void resolve_lm_head(ModelWeights& w) {
  const char* lm_head = "lm_head.weight";
  const char* embed = "model.embed_tokens.weight";
  // HF ties the head to the embedding after loading, so a stored lm_head is then unused.
  if (w.config.tie_word_embeddings) {
    auto it = w.tensors.find(embed);
    if (it == w.tensors.end())
      throw Error(w.source + ": tensor '" + embed + "' missing (the tied lm_head needs it)");
    w.tensors[lm_head] = it->second;
  } else if (!w.tensors.count(lm_head)) {
    throw Error(w.source + ": tensor '" + lm_head +
                "' missing, and config.json has tie_word_embeddings=false");
  }
}

}  // namespace

std::vector<TensorSpec> expected_tensors(const ModelConfig& c) {
  return family_model(c.family).tensors(c);
}

ModelWeights load_checkpoint(const fs::path& dir) {
  if (!fs::is_directory(dir))
    throw Error(dir.string() + ": not a checkpoint directory (expected config.json and safetensors)");
  ModelWeights w;
  w.source = dir.string();
  w.config = load_config(dir / "config.json");
  Shards shards = find_shards(dir);

  std::map<std::string, std::string> shard_of;   // every stored name → its file
  std::set<std::string> kept;                    // canonical names kept so far
  std::map<uint32_t, StoredExperts> per_expert;  // by layer, fused below
  std::vector<PendingCopy> copies;
  for (const std::string& file : shards.files) {
    SafetensorsFile f = read_safetensors(dir / file);
    uint32_t arena = uint32_t(w.arenas.size());
    w.arenas.push_back({file, f.mapping, f.data, f.data_bytes});
    for (SafetensorsTensor& t : f.tensors) {
      auto [seen, fresh] = shard_of.emplace(t.name, file);
      if (!fresh)
        throw Error(w.source + ": tensor '" + t.name + "' is stored in both " + seen->second +
                    " and " + file);
      std::optional<std::string> name = canonical_name(t.name);
      if (!name) continue;
      if (!kept.insert(*name).second)
        throw Error(w.source + ": tensor '" + *name + "' is stored under two names ('" + t.name +
                    "' and one with the other prefix)");
      const uint8_t* src = f.data + t.begin;
      if (std::optional<ExpertIndex> at = per_expert_name(*name)) {
        StoredExperts& layer = per_expert[at->layer];
        layer.experts = std::max(layer.experts, at->expert + uint64_t(1));
        layer.tensors[*name] = {src, t.dtype, std::move(t.shape)};
      } else if (t.dtype == DType::BF16 && reinterpret_cast<uintptr_t>(src) % alignof(bf16) == 0) {
        w.tensors[*name] = TensorRef{arena, t.begin, std::move(t.shape)};
      } else {
        copies.push_back({*name, t.shape, {{src, t.dtype, t.shape}}});
      }
    }
  }
  for (const auto& [name, file] : shards.weight_map) {
    auto it = shard_of.find(name);
    if (it == shard_of.end() || it->second != file)
      throw Error(w.source + ": " + kIndexFile + " puts tensor '" + name + "' in " + file +
                  ", but it is not there");
  }
  for (const auto& [l, stored] : per_expert) fuse_experts(w, l, stored, kept, copies);
  add_converted_arena(w, copies);
  resolve_lm_head(w);
  // Said before the shape check, which would name the count only as a dimension.
  for (const auto& [name, ref] : w.tensors)
    if ((name.ends_with(names::kExpertsGateUp) || name.ends_with(names::kExpertsDown)) && !ref.shape.empty())
      check_expert_count(w, ref.shape[0], "tensor '" + name + "' (shape " + shape_string(ref.shape) + ")");
  for (const TensorSpec& t : expected_tensors(w.config)) w.get(t.name, t.shape);
  return w;
}

std::vector<fs::path> write_hf_checkpoint(const ModelWeights& w, const fs::path& dir) {
  if (!w.in_host_memory())
    throw Error("cannot write " + w.source + " as a checkpoint: its weights are not in host memory");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(dir.string() + ": cannot create the directory: " + ec.message());
  const fs::path config_path = dir / "config.json", weights_path = dir / kSingleFile;
  {
    std::ofstream out(config_path);
    out << config_to_json(w.config).dump(2) << "\n";
    if (!out) throw Error(config_path.string() + ": write failed");
  }
  std::vector<SafetensorsEntry> entries;
  for (const auto& [name, ref] : w.tensors) {
    if (name == "lm_head.weight" && w.config.tie_word_embeddings) continue;
    const HostArena& arena = w.arenas.at(ref.arena);
    entries.push_back({name, DType::BF16, ref.shape, arena.data + ref.offset,
                       ref.elements() * sizeof(bf16)});
  }
  write_safetensors(weights_path, entries);
  return {config_path, weights_path};
}

}  // namespace spindle

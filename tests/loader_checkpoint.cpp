// Checkpoint directories: single file and sharded, name canonicalisation, tied heads, the
// tensor checks, conversion of F16/F32 (and misaligned bf16) tensors to bf16, and MoE experts
// stored fused or per expert.
#include <nlohmann/json.hpp>

#include "host/models/tensor_names.h"
#include "host/synthetic.h"
#include "loader_fixture.h"
#include "ops/bf16.h"

using namespace spindle;
using json = nlohmann::json;

namespace {

const ModelWeights& tiny() {
  static const ModelWeights w = make_synthetic("tiny");
  return w;
}

// A checkpoint directory holding the config of `w` and `entries` in one model.safetensors.
void write_checkpoint(const TempDir& dir, const ModelWeights& w,
                      const std::vector<SafetensorsEntry>& entries) {
  write_config(dir.path(), w.config);
  write_safetensors(dir / "model.safetensors", entries);
}

std::vector<SafetensorsEntry> without(std::vector<SafetensorsEntry> entries,
                                      const std::string& name) {
  std::erase_if(entries, [&](const SafetensorsEntry& e) { return e.name == name; });
  return entries;
}

SafetensorsEntry& find(std::vector<SafetensorsEntry>& entries, const std::string& name) {
  for (SafetensorsEntry& e : entries)
    if (e.name == name) return e;
  FAIL("no entry " << name);
  return entries.front();
}

}  // namespace

TEST_CASE("a single-file checkpoint loads with bf16 tensors in place") {
  TempDir dir;
  write_checkpoint(dir, tiny(), entries_of(tiny()));
  ModelWeights w = load_checkpoint(dir.path());
  CHECK(w.source == dir.path().string());
  CHECK(w.config.hidden == 64);
  CHECK(same_tensors(w, tiny()));
  REQUIRE(w.arenas.size() == 1);
  CHECK(w.arenas[0].name == "model.safetensors");
  CHECK(w.arenas[0].owner != nullptr);
  CHECK(w.total_bytes() == tiny().total_bytes());
  CHECK(same_tensors(load_model(dir.path().string()), tiny()));
}

TEST_CASE("a sharded checkpoint loads through its index") {
  TempDir dir;
  write_config(dir.path(), tiny().config);
  std::vector<SafetensorsEntry> all = entries_of(tiny()), first, second;
  json index = {{"metadata", {{"total_size", tiny().total_bytes()}}}, {"weight_map", json::object()}};
  for (size_t i = 0; i < all.size(); ++i) {
    bool in_first = i < all.size() / 2;
    (in_first ? first : second).push_back(all[i]);
    index["weight_map"][all[i].name] =
        in_first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  write_safetensors(dir / "model-00001-of-00002.safetensors", first);
  write_safetensors(dir / "model-00002-of-00002.safetensors", second);
  write_file(dir / "model.safetensors.index.json", index.dump());

  ModelWeights w = load_checkpoint(dir.path());
  CHECK(same_tensors(w, tiny()));
  CHECK(w.arenas.size() == 2);

  SUBCASE("the index must place each tensor in the shard that holds it") {
    json wrong = index;
    wrong["weight_map"][first.front().name] = "model-00002-of-00002.safetensors";
    write_file(dir / "model.safetensors.index.json", wrong.dump());
    CHECK_ERROR(load_checkpoint(dir.path()),
                "puts tensor '" + first.front().name + "' in model-00002-of-00002.safetensors");
  }
  SUBCASE("a listed shard that does not exist") {
    std::filesystem::remove(dir / "model-00002-of-00002.safetensors");
    CHECK_ERROR(load_checkpoint(dir.path()),
                "model.safetensors.index.json: shard 'model-00002-of-00002.safetensors' is listed");
  }
  SUBCASE("an index without a weight_map") {
    write_file(dir / "model.safetensors.index.json", R"({"metadata": {}})");
    CHECK_ERROR(load_checkpoint(dir.path()), "expected a 'weight_map' object");
  }
  SUBCASE("a tensor stored in two shards") {
    second.push_back(first.front());
    write_safetensors(dir / "model-00002-of-00002.safetensors", second);
    CHECK_ERROR(load_checkpoint(dir.path()), "is stored in both");
  }
}

TEST_CASE("the VL prefix model.language_model. folds to model., mtp and visual are dropped") {
  TempDir dir;
  std::vector<SafetensorsEntry> entries = entries_of(tiny());
  for (SafetensorsEntry& e : entries)
    if (e.name.starts_with("model.")) e.name = "model.language_model." + e.name.substr(6);
  const uint16_t extra[4] = {1, 2, 3, 4};
  entries.push_back({"mtp.fc.weight", DType::BF16, {2, 2}, extra, 8});
  entries.push_back({"model.visual.blocks.0.attn.qkv.weight", DType::BF16, {4}, extra, 8});
  write_checkpoint(dir, tiny(), entries);
  ModelWeights w = load_checkpoint(dir.path());
  CHECK(same_tensors(w, tiny()));

  SUBCASE("the same tensor under both prefixes is an error") {
    std::vector<SafetensorsEntry> plain = entries_of(tiny());
    entries.push_back(find(plain, "model.norm.weight"));
    write_checkpoint(dir, tiny(), entries);
    CHECK_ERROR(load_checkpoint(dir.path()), "is stored under two names");
  }
}

TEST_CASE("tied embeddings: lm_head is the embedding") {
  TempDir dir;
  ModelWeights tied = make_synthetic("tiny-tied");
  std::vector<SafetensorsEntry> entries = entries_of(tied);
  for (const SafetensorsEntry& e : entries) CHECK(e.name != "lm_head.weight");
  write_checkpoint(dir, tied, entries);
  ModelWeights w = load_checkpoint(dir.path());
  const TensorRef& head = w.tensors.at("lm_head.weight");
  const TensorRef& embed = w.tensors.at("model.embed_tokens.weight");
  CHECK(head.arena == embed.arena);
  CHECK(head.offset == embed.offset);
  CHECK(same_tensors(w, tied));
}

TEST_CASE("an untied checkpoint without lm_head is an error") {
  TempDir dir;
  write_checkpoint(dir, tiny(), without(entries_of(tiny()), "lm_head.weight"));
  CHECK_ERROR(load_checkpoint(dir.path()),
              "tensor 'lm_head.weight' missing, and config.json has tie_word_embeddings=false");
}

TEST_CASE("a missing tensor is named") {
  TempDir dir;
  write_checkpoint(dir, tiny(), without(entries_of(tiny()), "model.layers.1.mlp.up_proj.weight"));
  CHECK_ERROR(load_checkpoint(dir.path()),
              dir.path().string() + ": tensor 'model.layers.1.mlp.up_proj.weight' missing");
}

TEST_CASE("a missing Gated DeltaNet tensor is named") {
  const ModelWeights w = make_synthetic("tiny-qwen3.5");
  TempDir dir;
  write_checkpoint(dir, w, without(entries_of(w), "model.layers.1.linear_attn.A_log"));
  CHECK_ERROR(load_checkpoint(dir.path()), dir.path().string() + ": tensor 'model.layers.1.linear_attn.A_log' missing");
}

TEST_CASE("a tensor of the wrong shape is named with both shapes") {
  TempDir dir;
  std::vector<SafetensorsEntry> entries = entries_of(tiny());
  find(entries, "model.norm.weight").shape = {2, 32};
  write_checkpoint(dir, tiny(), entries);
  CHECK_ERROR(load_checkpoint(dir.path()),
              "tensor 'model.norm.weight' has shape [2,32], expected [64]");
}

TEST_CASE("F32 and F16 tensors are rounded to bf16, nearest even") {
  TempDir dir;
  std::vector<float> norm(64);
  for (size_t i = 0; i < norm.size(); ++i) norm[i] = float(i) * 0.37f - 5.0f;
  norm[0] = 1.0f + 0x1p-8f;          // halfway: rounds down to the even 1.0
  norm[1] = 1.0f + 3 * 0x1p-8f;      // halfway: rounds up to the even 1 + 2^-6
  norm[2] = 1.0f + 0x1p-8f + 0x1p-20f;  // past halfway: rounds up
  const std::vector<uint16_t> k_norm_f16 = {0x3c00, 0x0001, 0xc000, 0x7c00, 0x3c01, 0x3e00,
                                            0x8000, 0x7bff, 0, 0, 0, 0, 0, 0, 0, 0};
  std::vector<SafetensorsEntry> entries = entries_of(tiny());
  find(entries, "model.norm.weight") = {"model.norm.weight", DType::F32, {64}, norm.data(), 256};
  find(entries, "model.layers.0.self_attn.k_norm.weight") = {
      "model.layers.0.self_attn.k_norm.weight", DType::F16, {16}, k_norm_f16.data(), 32};
  write_checkpoint(dir, tiny(), entries);
  ModelWeights w = load_checkpoint(dir.path());

  REQUIRE(w.arenas.size() == 2);
  CHECK(w.arenas[1].name == "converted to bf16");
  auto value = [&](const std::string& name, size_t i) {
    const TensorRef& ref = w.tensors.at(name);
    CHECK(ref.arena == 1);
    uint16_t v;
    std::memcpy(&v, w.arenas[ref.arena].data + ref.offset + 2 * i, 2);
    return v;
  };
  CHECK(value("model.norm.weight", 0) == 0x3f80);
  CHECK(value("model.norm.weight", 1) == 0x3f82);
  CHECK(value("model.norm.weight", 2) == 0x3f81);
  for (size_t i = 3; i < norm.size(); ++i)
    CHECK(value("model.norm.weight", i) == f32_to_bf16(norm[i]));
  const std::string k = "model.layers.0.self_attn.k_norm.weight";
  CHECK(value(k, 0) == 0x3f80);  // 1
  CHECK(value(k, 1) == 0x3380);  // 2^-24, a half subnormal
  CHECK(value(k, 2) == 0xc000);  // -2
  CHECK(value(k, 3) == 0x7f80);  // inf
  CHECK(value(k, 4) == 0x3f80);  // 1 + 2^-10 rounds to 1
  CHECK(value(k, 5) == 0x3fc0);  // 1.5
  CHECK(value(k, 6) == 0x8000);  // -0
  CHECK(value(k, 7) == 0x4780);  // 65504 rounds to 65536
  CHECK(tensor_bytes(w, "model.embed_tokens.weight") == tensor_bytes(tiny(), "model.embed_tokens.weight"));
}

TEST_CASE("bf16 tensors that are not 2-byte aligned in the file are copied") {
  TempDir dir;
  json header = json::object();
  std::string data;
  for (const SafetensorsEntry& e : entries_of(tiny())) {
    header[e.name] = {{"dtype", "BF16"}, {"shape", e.shape}, {"data_offsets", {data.size(), data.size() + e.bytes}}};
    data.append(static_cast<const char*>(e.data), e.bytes);
  }
  std::string text = header.dump();
  if (text.size() % 2 == 0) text += ' ';  // an odd header puts the data section at an odd address
  write_config(dir.path(), tiny().config);
  write_file(dir / "model.safetensors", safetensors_bytes(text, data));
  ModelWeights w = load_checkpoint(dir.path());
  CHECK(same_tensors(w, tiny()));
  for (const auto& [name, ref] : w.tensors) CHECK(ref.arena == 1);
}

TEST_CASE("directories that are not checkpoints") {
  TempDir dir;
  CHECK_ERROR(load_model((dir / "nothing").string()),
              "model '" + (dir / "nothing").string() + "': no such directory");
  const std::string long_name = (dir / std::string(5000, 'x')).string();  // past the system's NAME_MAX
  CHECK_ERROR(load_model(long_name), "model '" + long_name + "': cannot be looked at: File name too long");
  write_file(dir / "file", "x");
  CHECK_ERROR(load_checkpoint(dir / "file"), "not a checkpoint directory");
  CHECK_ERROR(load_checkpoint(dir.path()), "config.json: cannot open the model config");
  write_config(dir.path(), tiny().config);
  CHECK_ERROR(load_checkpoint(dir.path()),
              "no model.safetensors or model.safetensors.index.json in the directory");
}

TEST_CASE("checkpoint files that are directories or devices are named in plain words") {
  TempDir dir;
  std::filesystem::create_directory(dir / "config.json");
  CHECK_ERROR(load_checkpoint(dir.path()),
              (dir / "config.json").string() + ": cannot open the model config: it is a directory, not a file");
  std::filesystem::remove(dir / "config.json");
  std::filesystem::create_symlink("/dev/null", dir / "config.json");
  CHECK_ERROR(load_checkpoint(dir.path()), "config.json: cannot open the model config: it is a character device");
  std::filesystem::remove(dir / "config.json");
  write_config(dir.path(), tiny().config);

  SUBCASE("model.safetensors") {
    std::filesystem::create_directory(dir / "model.safetensors");
    CHECK_ERROR(load_checkpoint(dir.path()),
                (dir / "model.safetensors").string() + ": cannot open safetensors file: it is a directory, not a file");
  }
  SUBCASE("the shard index") {
    std::filesystem::create_directory(dir / "model.safetensors.index.json");
    CHECK_ERROR(load_checkpoint(dir.path()), (dir / "model.safetensors.index.json").string() +
                                                 ": cannot open the shard index: it is a directory, not a file");
  }
  SUBCASE("a shard") {
    std::filesystem::create_directory(dir / "shard.safetensors");
    write_file(dir / "model.safetensors.index.json",
               json{{"weight_map", {{"model.norm.weight", "shard.safetensors"}}}}.dump());
    CHECK_ERROR(load_checkpoint(dir.path()), "shard.safetensors: cannot open safetensors file: it is a directory");
  }
}

TEST_CASE("a JSON file larger than any checkpoint's is refused before it is read") {
  TempDir dir;
  write_file(dir / "config.json", "");
  std::filesystem::resize_file(dir / "config.json", 100'000'001);  // sparse: no disk, no time
  CHECK_ERROR(load_config(dir / "config.json"),
              "config.json: cannot open the model config: it has 100000001 bytes, more than the 100000000");
}

TEST_CASE("shard names in the index stay inside the checkpoint directory") {
  TempDir root;
  const std::filesystem::path dir = root / "ckpt";
  std::filesystem::create_directories(dir / "sub");
  write_config(dir, tiny().config);
  write_safetensors(dir / "sub" / "model.safetensors", entries_of(tiny()));
  auto index_naming = [&](const std::string& shard) {
    json map = json::object();
    for (const SafetensorsEntry& e : entries_of(tiny())) map[e.name] = "sub/model.safetensors";
    map["model.norm.weight"] = shard;
    write_file(dir / "model.safetensors.index.json", json{{"weight_map", map}}.dump());
  };
  index_naming("sub/model.safetensors");
  CHECK(same_tensors(load_checkpoint(dir), tiny()));  // a subdirectory is inside
  index_naming("./sub/../sub/model.safetensors");  // another spelling of the same shard
  CHECK(same_tensors(load_checkpoint(dir), tiny()));

  const std::string index = (dir / "model.safetensors.index.json").string();
  write_safetensors(root / "outside.safetensors", entries_of(tiny()));
  for (const std::string shard : {"../outside.safetensors", "sub/../../outside.safetensors", "..", ".", "sub/.."}) {
    CAPTURE(shard);
    index_naming(shard);
    CHECK_ERROR(load_checkpoint(dir), index + ": tensor 'model.norm.weight' is in shard '" + shard +
                                          "', which is not a file inside the checkpoint directory");
  }
  index_naming((root / "outside.safetensors").string());
  CHECK_ERROR(load_checkpoint(dir), "tensor 'model.norm.weight' is in shard '" + (root / "outside.safetensors").string() +
                                        "', an absolute path; shards are named relative to the checkpoint directory");
  index_naming("/etc/passwd");
  CHECK_ERROR(load_checkpoint(dir), "shard '/etc/passwd', an absolute path");

  SUBCASE("through a symlink") {
    std::filesystem::create_symlink(root / "outside.safetensors", dir / "link.safetensors");
    index_naming("link.safetensors");
    CHECK_ERROR(load_checkpoint(dir), "shard 'link.safetensors', which resolves through symlinks to " +
                                          std::filesystem::weakly_canonical(root / "outside.safetensors").string() +
                                          ", outside the checkpoint directory");
  }
  SUBCASE("through a symlinked directory") {
    std::filesystem::create_directory_symlink(root.path(), dir / "up");
    index_naming("up/outside.safetensors");
    CHECK_ERROR(load_checkpoint(dir), "shard 'up/outside.safetensors', which resolves through symlinks to");
  }
}

namespace {

const ModelWeights& tiny_moe() {
  static const ModelWeights w = make_synthetic("tiny-moe");
  return w;
}

// The entries of `w` with its fused experts split per expert, as the released Qwen3-MoE
// checkpoints store them.
std::vector<SafetensorsEntry> per_expert_entries(const ModelWeights& w) {
  const ModelConfig& c = w.config;
  const uint64_t H = c.hidden, Im = c.moe_intermediate, block = H * Im * 2;  // one expert's projection
  std::vector<SafetensorsEntry> out;
  for (const SafetensorsEntry& e : entries_of(w))
    if (!e.name.ends_with(names::kExpertsGateUp) && !e.name.ends_with(names::kExpertsDown)) out.push_back(e);
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    auto bytes = [&](const char* fused) {
      const TensorRef& ref = w.tensors.at(names::layer(l, fused));
      return w.arenas[ref.arena].data + ref.offset;
    };
    const uint8_t *gate_up = bytes(names::kExpertsGateUp), *down = bytes(names::kExpertsDown);
    for (uint32_t e = 0; e < c.num_experts; ++e) {
      out.push_back({names::expert(l, e, "gate_proj"), DType::BF16, {Im, H}, gate_up + 2 * e * block, block});
      out.push_back({names::expert(l, e, "up_proj"), DType::BF16, {Im, H}, gate_up + (2 * e + 1) * block, block});
      out.push_back({names::expert(l, e, "down_proj"), DType::BF16, {H, Im}, down + e * block, block});
    }
  }
  return out;
}

// A checkpoint of two shards and their index, the entries alternating between them (so one
// layer's experts, and one expert's projections, sit in both).
void write_two_shards(const TempDir& dir, const ModelConfig& config, const std::vector<SafetensorsEntry>& entries) {
  write_config(dir.path(), config);
  const std::string files[2] = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};
  std::vector<SafetensorsEntry> shards[2];
  json index = {{"weight_map", json::object()}};
  for (size_t i = 0; i < entries.size(); ++i) {
    shards[i % 2].push_back(entries[i]);
    index["weight_map"][entries[i].name] = files[i % 2];
  }
  for (int s = 0; s < 2; ++s) write_safetensors(dir / files[s], shards[s]);
  write_file(dir / "model.safetensors.index.json", index.dump());
}

}  // namespace

TEST_CASE("tiny-moe with fused experts loads back bit-identical, in place") {
  TempDir dir;
  write_hf_checkpoint(tiny_moe(), dir.path());
  ModelWeights w = load_checkpoint(dir.path());
  CHECK(same_tensors(w, tiny_moe()));
  CHECK(w.arenas.size() == 1);
}

TEST_CASE("per-expert tensors across two shards fuse into the canonical tensors, bit-identical") {
  TempDir dir;
  std::vector<SafetensorsEntry> entries = per_expert_entries(tiny_moe());
  std::vector<float> wide;
  SUBCASE("bf16") {}
  SUBCASE("an F32 expert is rounded to bf16 as it is fused") {
    SafetensorsEntry& up = find(entries, names::expert(1, 5, "up_proj"));
    wide.resize(up.bytes / 2);  // bf16 widens exactly, so it rounds back to itself
    for (size_t i = 0; i < wide.size(); ++i) wide[i] = bf16_to_f32(static_cast<const uint16_t*>(up.data)[i]);
    up = {up.name, DType::F32, up.shape, wide.data(), wide.size() * 4};
  }
  SUBCASE("under the VL prefix") {
    for (SafetensorsEntry& e : entries)
      if (e.name.starts_with("model.")) e.name = "model.language_model." + e.name.substr(6);
  }
  write_two_shards(dir, tiny_moe().config, entries);
  ModelWeights w = load_checkpoint(dir.path());
  CHECK(same_tensors(w, tiny_moe()));  // the fused tensors, and no per-expert name left
  REQUIRE(w.arenas.size() == 3);
  CHECK(w.arenas[2].name == "converted to bf16");
  CHECK(w.tensors.at("model.layers.1.mlp.experts.gate_up_proj").arena == 2);
  CHECK(w.tensors.at("model.layers.1.mlp.experts.down_proj").arena == 2);
}

TEST_CASE("a missing expert tensor is named") {
  TempDir dir;
  write_two_shards(dir, tiny_moe().config,
                   without(per_expert_entries(tiny_moe()), "model.layers.0.mlp.experts.3.up_proj.weight"));
  CHECK_ERROR(load_checkpoint(dir.path()),
              dir.path().string() + ": tensor 'model.layers.0.mlp.experts.3.up_proj.weight' missing");
}

TEST_CASE("an expert count other than config.json's num_experts names both counts") {
  TempDir dir;
  std::vector<SafetensorsEntry> entries = per_expert_entries(tiny_moe());
  SUBCASE("per-expert tensors of experts 0 to 5") {
    std::erase_if(entries, [](const SafetensorsEntry& e) {
      return e.name.find(".experts.6.") != std::string::npos || e.name.find(".experts.7.") != std::string::npos;
    });
    write_checkpoint(dir, tiny_moe(), entries);
    CHECK_ERROR(load_checkpoint(dir.path()),
                dir.path().string() + ": the checkpoint has 6 experts in layer 0 (model.layers.0.mlp.experts.0 to "
                                      ".5), but config.json has num_experts = 8");
  }
  SUBCASE("an expert index past the last") {
    SafetensorsEntry extra = find(entries, "model.layers.1.mlp.experts.0.gate_proj.weight");
    extra.name = "model.layers.1.mlp.experts.8.gate_proj.weight";
    entries.push_back(extra);
    write_checkpoint(dir, tiny_moe(), entries);
    CHECK_ERROR(load_checkpoint(dir.path()),
                "the checkpoint has 9 experts in layer 1 (model.layers.1.mlp.experts.0 to .8), "
                "but config.json has num_experts = 8");
  }
  SUBCASE("a fused gate_up_proj of 6 experts") {
    entries = entries_of(tiny_moe());
    SafetensorsEntry& gate_up = find(entries, "model.layers.0.mlp.experts.gate_up_proj");
    gate_up.shape[0] = 6;
    gate_up.bytes = gate_up.bytes / 8 * 6;
    write_checkpoint(dir, tiny_moe(), entries);
    CHECK_ERROR(load_checkpoint(dir.path()),
                dir.path().string() + ": the checkpoint has 6 experts in tensor "
                                      "'model.layers.0.mlp.experts.gate_up_proj' (shape [6,64,64]), "
                                      "but config.json has num_experts = 8");
  }
}

TEST_CASE("a layer storing its experts both fused and per expert is an error") {
  TempDir dir;
  std::vector<SafetensorsEntry> entries = entries_of(tiny_moe());
  for (const SafetensorsEntry& e : per_expert_entries(tiny_moe()))
    if (e.name.starts_with("model.layers.1.mlp.experts.")) entries.push_back(e);
  write_checkpoint(dir, tiny_moe(), entries);
  CHECK_ERROR(load_checkpoint(dir.path()),
              dir.path().string() + ": layer 1 stores its experts both fused "
                                    "('model.layers.1.mlp.experts.gate_up_proj') and per expert "
                                    "('model.layers.1.mlp.experts.0.down_proj.weight')");
}

TEST_CASE("an expert tensor of the wrong shape is named with both shapes") {
  TempDir dir;
  SUBCASE("fused gate_up_proj [E, Im, H]") {
    std::vector<SafetensorsEntry> entries = entries_of(tiny_moe());
    SafetensorsEntry& gate_up = find(entries, "model.layers.0.mlp.experts.gate_up_proj");
    gate_up.shape = {8, 32, 64};
    gate_up.bytes /= 2;
    write_checkpoint(dir, tiny_moe(), entries);
    CHECK_ERROR(load_checkpoint(dir.path()), dir.path().string() +
                                                 ": tensor 'model.layers.0.mlp.experts.gate_up_proj' has shape "
                                                 "[8,32,64], expected [8,64,64]");
  }
  SUBCASE("a per-expert down_proj transposed") {
    std::vector<SafetensorsEntry> entries = per_expert_entries(tiny_moe());
    find(entries, "model.layers.0.mlp.experts.2.down_proj.weight").shape = {32, 64};
    write_checkpoint(dir, tiny_moe(), entries);
    CHECK_ERROR(load_checkpoint(dir.path()), dir.path().string() +
                                                 ": tensor 'model.layers.0.mlp.experts.2.down_proj.weight' has shape "
                                                 "[32,64], expected [64,32]");
  }
}

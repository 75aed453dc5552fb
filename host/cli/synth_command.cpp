// spindle synth: write a synthetic preset out as a Hugging Face checkpoint.
#include <cstdio>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "host/checkpoint.h"
#include "host/cli/commands.h"
#include "host/cli/options.h"
#include "host/synthetic.h"

namespace spindle::cli {
namespace {

struct SynthFlags {
  std::string preset;
  uint64_t seed = 0;
  std::string out;
  bool json = false;
};

void synth(const SynthFlags& f) {
  std::fprintf(stderr, "spindle: generating %s (seed %llu) ...\n", f.preset.c_str(),
               (unsigned long long)f.seed);
  const ModelWeights w = make_synthetic(f.preset, f.seed);
  std::fprintf(stderr, "spindle: writing %.2f GB to %s ...\n", double(w.total_bytes()) / 1e9,
               f.out.c_str());
  const std::vector<std::filesystem::path> written = write_hf_checkpoint(w, f.out);
  if (!f.json) {
    std::printf("%s\n", f.out.c_str());
    return;
  }
  nlohmann::json files = nlohmann::json::array();
  for (const std::filesystem::path& p : written)
    files.push_back({{"path", p.string()}, {"bytes", std::filesystem::file_size(p)}});
  print_json({{"directory", f.out},
              {"preset", f.preset},
              {"seed", f.seed},
              {"weight_bytes", w.total_bytes()},
              {"files", files}});
}

std::string preset_names() {
  std::string names;
  for (const SyntheticPreset& p : synthetic_presets())
    names += (names.empty() ? "" : ", ") + p.name;
  return names;
}

}  // namespace

void add_synth_command(CLI::App& app) {
  auto f = std::make_shared<SynthFlags>();
  CLI::App* cmd = app.add_subcommand(
      "synth", "Write a synthetic preset as a Hugging Face checkpoint (config.json + safetensors)");
  cmd->add_option("preset", f->preset, "one of: " + preset_names())->required();
  cmd->add_option("--out,-o", f->out, "the directory to write (made when missing)")
      ->required()
      ->check(output_directory());
  cmd->add_option("--seed", f->seed, "the weights' seed")->capture_default_str();
  cmd->add_flag("--json", f->json,
                "print {directory, preset, seed, weight_bytes, files: [{path, bytes}]} instead of the directory alone");
  cmd->callback([f] { synth(*f); });
}

}  // namespace spindle::cli

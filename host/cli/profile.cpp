#include "host/cli/profile.h"

#include "tasks/error.h"

namespace spindle::cli {
namespace {

// The cluster program's tiling: o_proj a piece a kv head, attention in 8 chunks, the MLP in
// gangs of 8 (docs/two-hop-layer.md); 96 MLP pieces, since 48 measured slower on qwen3-0.6b
// (docs/EXPERIMENTS.md).
constexpr uint32_t kClusterAttnChunks = 8, kClusterMlpPieces = 96, kClusterGang = 8;

// The cluster program measured faster than the plain megakernel on qwen3-0.6b up to this
// context, and 15% slower at 4096 (docs/EXPERIMENTS.md).
constexpr uint32_t kClusterMeasuredFasterTo = 1024;

bool measured_for_cluster(const ModelConfig& c) {
  return c.hidden == 1024 && c.n_layers == 28 && c.n_heads == 16 && c.n_kv_heads == 8 && c.head_dim == 128 &&
         c.intermediate == 3072 && c.num_experts == 0 && c.linear_num_value_heads == 0;
}

std::string tunes(const BuildOptions& b) {
  return "kv-head-waits=on o-proj-split=" + std::to_string(b.o_proj_split.pieces) +
         " attn-chunks=" + std::to_string(b.attn_chunks) + " fused-mlp=" + std::to_string(b.fused_mlp.pieces) + "/" +
         std::to_string(b.fused_mlp.group);
}

const char* const kTilingKeys[] = {"kv-head-waits", "o-proj-split", "attn-chunks", "fused-mlp", "down-split",
                                   "attn-q-splits"};

}  // namespace

Profile parse_profile(const std::string& name) {
  for (Profile p : {Profile::Fastest, Profile::Plain, Profile::PerOp, Profile::Graph})
    if (name == profile_name(p)) return p;
  throw Error("--profile: no profile '" + name + "' (valid: fastest, plain, per-op, graph)");
}

const char* profile_name(Profile p) {
  switch (p) {
    case Profile::Fastest: return "fastest";
    case Profile::Plain: return "plain";
    case Profile::PerOp: return "per-op";
    case Profile::Graph: return "graph";
  }
  return "?";
}

void add_profile_option(CLI::App& cmd, std::string& profile) {
  cmd.add_option("--profile", profile,
                 "fastest: the fastest configuration measured for the model and executor (on cuda for qwen3-0.6b "
                 "the cluster program, whose tiling changes the tokens' bits: the same for a given model, executor "
                 "and context, not those of the other executors; the line on stderr says which was picked); plain: "
                 "the default tiling and mode (every executor's same bits); per-op, graph: plain's graph in cuda's "
                 "per-op or CUDA-graph mode")
      ->capture_default_str();
}

ProfileChoice choose_profile(Profile profile, const ModelConfig& config, const BuildOptions& build,
                             const ExecutorOptions& exec, const TuneSettings& tuned, bool greedy, uint32_t context) {
  ProfileChoice c{build, exec, {}};
  const bool cuda = exec.kind == ExecutorKind::Cuda;
  const std::string head = std::string("profile ") + profile_name(profile) + ": ";
  if ((profile == Profile::PerOp || profile == Profile::Graph) && !cuda)
    throw Error(std::string("--profile ") + profile_name(profile) + ": a cuda mode, and the executor is " +
                executor_kind_name(exec.kind));
  if (profile == Profile::PerOp || profile == Profile::Graph) {
    c.exec.cuda_mode = profile == Profile::PerOp ? CudaMode::PerOp : CudaMode::Graph;
    c.line = head + "cuda's " + cuda_mode_name(c.exec.cuda_mode) + " mode on the default tiling";
    return c;
  }
  if (profile == Profile::Plain || !cuda) {
    c.line = head + executor_kind_name(exec.kind) + (cuda ? " megakernel" : "") + " on the default tiling" +
             (profile == Profile::Fastest ? " (no faster configuration measured for this executor)" : "");
    return c;
  }
  std::string why_not;
  if (tuned.has("cuda-cluster")) why_not = "--tune cuda-cluster decides";
  for (const char* key : kTilingKeys)
    if (why_not.empty() && tuned.has(key)) why_not = std::string("--tune ") + key + " sets the tiling";
  if (why_not.empty() && !measured_for_cluster(config))
    why_not = "the cluster program was measured faster on qwen3-0.6b's shape alone";
  if (why_not.empty() && !greedy) why_not = "the cluster program samples greedily alone";
  if (why_not.empty() && context > kClusterMeasuredFasterTo)
    why_not = "context " + std::to_string(context) + ": the cluster program was measured faster to position " +
              std::to_string(kClusterMeasuredFasterTo) + " alone (15% slower at 4096)";
  if (!why_not.empty()) {
    c.line = head + "the plain cuda megakernel on the default tiling (" + why_not + ")";
    return c;
  }
  c.build.kv_head_waits = true;
  c.build.o_proj_split = {config.n_kv_heads, 0};
  c.build.attn_chunks = kClusterAttnChunks;
  c.build.fused_mlp = {kClusterMlpPieces, kClusterGang};
  c.exec.megakernel.cluster_program = true;
  c.line = head + "the cuda cluster program (--tune cuda-cluster=on " + tunes(c.build) +
           "), qwen3-0.6b's measured best; its tiling changes the tokens' bits (--profile plain gives the "
           "other executors')";
  return c;
}

ProfileChoice plain_fallback(Profile profile, const BuildOptions& build, const ExecutorOptions& exec,
                             const std::string& problem) {
  ExecutorOptions e = exec;
  e.megakernel.cluster_program = false;
  return {build, e,
          std::string("profile ") + profile_name(profile) +
              ": the plain cuda megakernel on the default tiling (the cluster program refuses the graph: " + problem +
              ")"};
}

}  // namespace spindle::cli

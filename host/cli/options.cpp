#include "host/cli/options.h"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>

#include "host/cli/profile.h"
#include "host/cpu_executors.h"
#include "host/vulkan_executor.h"
#include "tasks/error.h"

namespace spindle::cli {
namespace {

// A size in KiB of a CUDA block's shared memory: at most 227, an H200 block's.
void add_shared_kib_option(CLI::App& cmd, const std::string& name, uint32_t& kib, const std::string& help) {
  add_ranged_option(cmd, name, kib, help, 0u, 227u);
}

// A whole number's text as it is typed (a minus where `may_be_negative`, then decimal digits)
// with its leading zeros dropped; an error for any other text that begins as a number does
// ("0x10", "1e3", " 5", "+5", "-1" for an unsigned option) and for one past 64 bits, which
// CLI11 would read as 2^64 - 1 or -1. A word ("abc", "auto") is left to the option's own conversion
// or check.
CLI::Validator decimal_digits_only(bool may_be_negative) {
  return CLI::Validator(
      [may_be_negative](std::string& text) -> std::string {
        if (text.empty() || std::isalpha(static_cast<unsigned char>(text[0]))) return {};
        const size_t sign = may_be_negative && text[0] == '-' ? 1 : 0;
        if (text.size() == sign || text.find_first_not_of("0123456789", sign) != std::string::npos)
          return "'" + text + "' is not a whole number" + (may_be_negative ? "" : " from 0") + " in decimal";
        text.erase(sign, std::min(text.find_first_not_of('0', sign), text.size() - 1) - sign);
        uint64_t v = 0;
        if (std::from_chars(text.data() + sign, text.data() + text.size(), v).ec == std::errc::result_out_of_range)
          return "'" + text + "' does not fit in 64 bits";
        return {};
      },
      "");
}

std::string not_nan(const std::string& text) {
  return std::isnan(std::strtod(text.c_str(), nullptr)) ? "'" + text + "' is not a number" : std::string();
}

// The option's type as CLI11 names it ("UINT", "FLOAT"), without its validators' descriptions.
std::string base_type(const CLI::Option& o) {
  const std::string type = o.get_type_name();
  return type.substr(0, type.find(':'));
}

std::string system_reason() { return std::strerror(errno); }

// False where the path cannot be looked at, as for one that does not exist.
bool is_a_directory(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}

}  // namespace

CLI::Option* add_ranged_option(CLI::App& cmd, const std::string& name, uint32_t& value, const std::string& help,
                               uint32_t lo, uint32_t hi) {
  return cmd.add_option(name, value, help)->capture_default_str()->check(CLI::Range(lo, hi));
}

void add_model_option(CLI::App& cmd, std::string& model) {
  model = kDefaultModel;
  cmd.add_option("--model,-m", model,
                 "synthetic:PRESET[@SEED] (weights generated from a seed) or a Hugging Face "
                 "checkpoint directory (config.json + safetensors; its tokenizer.json for text)")
      ->capture_default_str();
}

CLI::Option* add_context_option(CLI::App& cmd, uint32_t& context, const std::string& when_zero) {
  return cmd.add_option("--context", context, "KV capacity in positions; 0 = " + when_zero)->capture_default_str();
}

void add_copy_option(CLI::App& cmd, double& copy_gib) {
  cmd.add_option("--copy-gib", copy_gib,
                 "size of the copy that measures the bandwidth ceiling (GiB, 1/1024 to 64; at most 1 for vulkan and "
                 "the host)")
      ->capture_default_str()
      ->check(CLI::Range(1.0 / 1024, 64.0));
}

std::vector<CLI::Option*> add_tiling_options(CLI::App& cmd, BuildOptions& build) {
  const size_t before = cmd.get_options().size();
  cmd.add_option("--rows-per-tile", build.rows_per_tile,
                 "output rows of each GEMV / GATE_UP task; 0 = chosen from --stage-tasks")
      ->capture_default_str();
  add_ranged_option(cmd, "--stage-tasks", build.stage_tasks,
                    "about how many tasks each GEMV / GATE_UP stage is split into (rows a task: a multiple of 8)",
                    1u, 1u << 20);
  cmd.add_option("--attn-chunks", build.attn_chunks,
                 "tasks each kv head's attention is split into (position ranges of the context; their partials "
                 "merge in order, so the count is part of the numerics); 0 = about 256 positions each, at most "
                 "128 tasks in all")
      ->capture_default_str();
  cmd.add_option("--attn-q-splits", build.attn_q_splits,
                 "parts each kv head's q heads are split into, an attention task each (a schedule: the bits do "
                 "not change); must divide num_attention_heads / num_key_value_heads; 0 = when attention is one "
                 "chunk a kv head, the most that keep it within 128 tasks, else 1")
      ->capture_default_str();
  cmd.add_option("--gdn-gang", build.gdn_gang,
                 "members of each GDN value head's gang, which share its state rows and which the CUDA persistent "
                 "kernel runs at once (a schedule: the bits do not change); must divide the value head size; 1 = a "
                 "task holds whole heads; 0 = the most that leave 16 rows a member within 128 GDN tasks")
      ->capture_default_str();
  const std::string split_help =
      "'s row dots as the sums of PIECES dots over equal column ranges, GROUP pieces at a time (all when "
      "omitted), as a layer split over blocks sums them (docs/two-hop-layer.md); part of the numerics, so it "
      "changes the tokens' bits; the cuda megakernel runs it in its two-hop build (1 block an SM); 0 = the "
      "plain canonical dot";
  cmd.add_option_function<std::string>(
         "--o-proj-split", [&build](const std::string& v) { build.o_proj_split = parse_split(v, "--o-proj-split"); },
         "o_proj" + split_help)
      ->type_name("PIECES[/GROUP]");
  cmd.add_option_function<std::string>(
         "--down-split", [&build](const std::string& v) { build.down_split = parse_split(v, "--down-split"); },
         "down" + split_help)
      ->type_name("PIECES[/GROUP]");
  cmd.add_option_function<std::string>(
         "--fused-mlp", [&build](const std::string& v) { build.fused_mlp = parse_split(v, "--fused-mlp"); },
         "each layer's MLP (gate_up and down) as one stage of PIECES tasks of intermediate/PIECES columns, in "
         "gangs of GANG (all of them when omitted; at most 255) that sum down's dots as --down-split "
         "PIECES/GANG does, so the tokens' bits are that split's (docs/two-hop-layer.md); 0 = the gate_up and "
         "down stages")
      ->type_name("PIECES[/GANG]")
      ->excludes("--down-split");
  cmd.add_flag("--kv-head-waits", build.kv_head_waits,
               "each layer's q, k and v rows as one stage a kv head, so that the head's attention tasks wait for "
               "its own rows alone instead of the whole projection; with --o-proj-split KV_HEADS also o_proj as "
               "pieces a kv head, each waiting for its head's attention alone (the cuda megakernel runs them in "
               "its two-hop build); a schedule, so the tokens' bits do not change (the fp64 executor's o_proj "
               "pieces excepted: docs/numerics.md)");
  const std::vector<CLI::Option*> all = cmd.get_options();
  // Out of the help: --tune is their documented form (spindle tune --list).
  for (auto o = all.begin() + std::ptrdiff_t(before); o != all.end(); ++o) (*o)->group("");
  return {all.begin() + std::ptrdiff_t(before), all.end()};
}

CLI::Option* add_graph_file_option(CLI::App& cmd, std::string& file, const std::string& help,
                                   const std::vector<CLI::Option*>& build_options) {
  CLI::Option* graph = cmd.add_option("--graph,-g", file, help)->type_name("FILE")->check(input_file());
  for (CLI::Option* o : build_options) graph->excludes(o);
  return graph;
}

void add_graph_source_options(CLI::App& cmd, GraphSource& source, const std::string& context_when_zero) {
  CLI::Option* context = add_context_option(cmd, source.context, context_when_zero);
  std::vector<CLI::Option*> build_options = add_tiling_options(cmd, source.build);
  build_options.push_back(context);
  add_graph_file_option(cmd, source.file,
                        "run the graph saved in this .sptg file (spindle graph save) with --model's weights instead "
                        "of building one; refused when it was built for another model or shape, or when the run "
                        "needs more positions than its context",
                        build_options);
}

GemvSplit parse_split(const std::string& text, const std::string& option) {
  const size_t slash = text.find('/');
  auto number = [&](const std::string& part) {
    if (part.empty() || part.size() > 5 || part.find_first_not_of("0123456789") != std::string::npos)
      throw CLI::ValidationError(option, "'" + text + "' is not PIECES or PIECES/GROUP (numbers up to 65535)");
    const uint32_t v = uint32_t(std::stoul(part));
    if (v > 0xFFFFu) throw CLI::ValidationError(option, "'" + text + "': " + part + " is more than 65535");
    return v;
  };
  return {number(text.substr(0, slash)), slash == std::string::npos ? 0u : number(text.substr(slash + 1))};
}

void add_executor_options(CLI::App& cmd, ExecutorFlags& flags) {
  add_profile_option(cmd, flags.profile);
  add_tune_option(cmd, flags.tune, true, true);
  cmd.add_option("--executor,-e", flags.executor,
                 "auto (cuda when a GPU is usable, else threaded), sequential, fp64 (sequential "
                 "with fp64 accumulation: the KL gate's truth), threaded, cuda, or vulkan (persistent "
                 "compute shader; lavapipe runs it on the CPU)")
      ->capture_default_str();
  cmd.add_option("--workers,-w", flags.workers,
                 "threads (threaded, at most " + std::to_string(ThreadedExecutor::kMaxWorkers) +
                     "), blocks (cuda megakernel: more than fit at once are cut to those) or workgroups (vulkan, "
                     "at most " + std::to_string(VulkanExecutor::kMaxWorkers) +
                     " and the device's dispatch limit); 0 = the machine's count; the sequential executors and "
                     "cuda's per-op and graph modes ignore it")
      ->capture_default_str();
  cmd.add_option("--schedule", flags.schedule,
                 "how tasks reach workers: ticket (atomic tickets: one global counter, or in the cuda "
                 "megakernel one per stage of each step) or static (per-worker lists built on the host)")
      ->capture_default_str();
  cmd.add_option("--cuda-mode", flags.cuda_mode,
                 "cuda only: megakernel, per-op (one kernel per op) or graph (a CUDA graph of "
                 "the per-op kernels)")
      ->capture_default_str();
  add_ranged_option(cmd, "--cuda-blocks-per-sm", flags.cuda_blocks_per_sm,
                    "cuda megakernel only: persistent blocks an SM holds, 1 or 2 (2: the kernel built for at most "
                    "128 registers a thread, and every block's shared memory within half an SM's); with --workers 0, "
                    "this many blocks per SM",
                    1u, 2u);
  add_shared_kib_option(cmd, "--cuda-preload-kb", flags.cuda_preload_kb,
                        "cuda megakernel only: a projection task whose weights take at most this many KiB copies "
                        "them into shared memory before its dependency wait (bulk copies); an MLP gang member running "
                        "at once with its gang copies its weights whatever their size (qwen3-0.6b's 128/16 pieces: "
                        "144 KiB) where shared memory has room; 0 = no copies at all");
  add_shared_kib_option(cmd, "--cuda-copy-ahead-kb", flags.cuda_copy_ahead_kb,
                        "cuda megakernel, two-hop build (split GEMVs, MLP gangs) only: a task whose weights copy "
                        "(--cuda-preload-kb) takes at least this many KiB may have it started during the dependency "
                        "wait of the block's task before, once its record is in, wherever that task leaves shared "
                        "memory free (the launch then takes all it may have); 0 = never");
  cmd.add_flag("--cuda-cluster", flags.cuda_cluster,
               "cuda megakernel only: run the graph as the cluster program (docs/two-hop-layer.md): each layer "
               "in two global hops, a kv head's q, k, v, attention and o_proj piece on a cluster of 8 blocks, the "
               "MLP on gangs of 8, every weight streamed through a shared-memory ring; the graph must be built "
               "with --kv-head-waits --o-proj-split 8 --attn-chunks 8 --fused-mlp PIECES/8, greedy sampling; its "
               "trace has a record a block's phase (q/k/v, attention, o_proj, MLP member, LM head rows)");
  add_shared_kib_option(cmd, "--cuda-attn-kv-kb", flags.cuda_attn_kv_kb,
                        "cuda only (every mode): KiB of shared memory an attention task stages K and V rows in (4 * "
                        "head_dim bytes a position): a chunk that fits arrives with its q heads in one round trip, "
                        "a longer one K then V in parts; 0 = 160 (the cluster program: 64, the rest of a block's shared "
                        "memory being its weight ring), never more than the longest chunk needs");
  add_shared_kib_option(cmd, "--cuda-attn-score-kb", flags.cuda_attn_score_kb,
                        "cuda only (every mode): KiB of shared memory for an attention task's scores (4 bytes a "
                        "position and q head of the group); a chunk with more positions is scored twice; 0 = 32 (the "
                        "cluster program: 16)");
  cmd.add_option("--cuda-l2-prefetch-distance", flags.cuda_l2_prefetch_distance,
                 "cuda megakernel only: each task, once it has run, asks the L2 for its share of the weights of the "
                 "stage this many stages later, counted around the step (bulk prefetch); 0 = none")
      ->capture_default_str();
  cmd.add_option("--cuda-l2-prefetch-mb", flags.cuda_l2_prefetch_mb,
                 "cuda megakernel only: MiB of a stage's weights (its first tasks') prefetched into L2 by the "
                 "stage --cuda-l2-prefetch-distance before it, at most 1024; 0 = none; auto = 2 MiB per 1024 of "
                 "the model's hidden size (2 for qwen3-0.6b, 8 for qwen3-8b)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto"}) | CLI::Range(0u, 1024u))
      ->transform(decimal_digits_only(false));
  cmd.add_option("--steps-per-launch", flags.steps_per_launch,
                 "cuda megakernel only: decode steps one launch of the persistent kernel runs (the sampler "
                 "writes each next token and position on the device); 0 = every step asked for at once")
      ->capture_default_str();
  // Out of the help: --profile and --tune are their documented forms (spindle tune --list).
  for (const char* name : {"--cuda-mode", "--cuda-blocks-per-sm", "--cuda-preload-kb", "--cuda-copy-ahead-kb",
                           "--cuda-cluster", "--cuda-attn-kv-kb", "--cuda-attn-score-kb", "--cuda-l2-prefetch-distance",
                           "--cuda-l2-prefetch-mb", "--steps-per-launch"})
    cmd.get_option(name)->group("");
  cmd.add_option("--watchdog-ms", flags.watchdog_ms,
                 "a dependency wait longer than this is an error naming the task")
      ->capture_default_str();
  cmd.add_option("--device", flags.device,
                 "vulkan only: the device's index as `spindle info` lists them; -1 = the first usable "
                 "discrete GPU, else integrated, else the CPU")
      ->capture_default_str();
  cmd.add_option("--vk-warps", flags.vulkan.warps,
                 "vulkan only: logical warps of 32 invocations per workgroup (workgroup size 32*N; N up to the "
                 "device's workgroup limit / 32, 32 on NVIDIA, larger is refused); 0 = 1 on lavapipe, else 8")
      ->capture_default_str();
  cmd.add_option("--vk-dot-unroll", flags.vulkan.dot_unroll,
                 "vulkan only: 256-element blocks of each of a warp's two weight rows loaded per loop trip before "
                 "the first product (2*N 16-byte loads in flight a lane): 1, 2, 4 or 8; 0 = the deepest whose 256*N "
                 "elements fit in the smallest projection input (8 for qwen3-8b, 4 for qwen3-0.6b)")
      ->capture_default_str();
  cmd.add_option("--vk-attn-unroll", flags.vulkan.attn_unroll,
                 "vulkan only: cache positions whose K and V rows an attention warp loads together: 1, 2, 4 or 8")
      ->capture_default_str();
  for (const char* name : {"--vk-warps", "--vk-dot-unroll", "--vk-attn-unroll"}) cmd.get_option(name)->group("");
}

ExecutorOptions executor_options(const ExecutorFlags& flags) {
  ExecutorOptions o;
  o.kind = parse_executor_kind(flags.executor);
  o.workers = flags.workers;
  o.schedule = parse_schedule_kind(flags.schedule);
  o.cuda_mode = parse_cuda_mode(flags.cuda_mode);
  o.watchdog_ms = flags.watchdog_ms;
  o.steps_per_launch = flags.steps_per_launch;
  o.device = flags.device;
  o.vulkan = flags.vulkan;
  o.megakernel.blocks_per_sm = flags.cuda_blocks_per_sm;
  o.megakernel.weight_preload_bytes = flags.cuda_preload_kb << 10;
  o.megakernel.copy_ahead_bytes = flags.cuda_copy_ahead_kb << 10;
  o.megakernel.cluster_program = flags.cuda_cluster;
  o.megakernel.attn_kv_bytes = flags.cuda_attn_kv_kb << 10;
  o.megakernel.attn_score_bytes = flags.cuda_attn_score_kb << 10;
  o.megakernel.l2_prefetch_distance = flags.cuda_l2_prefetch_distance;
  o.megakernel.l2_prefetch_bytes = flags.cuda_l2_prefetch_mb == "auto" ? kL2PrefetchAuto
                                                                       : std::stoull(flags.cuda_l2_prefetch_mb) << 20;
  BuildOptions tiling_set_elsewhere;  // open_profiled_session applies the tiling knobs
  apply_tune(flags.tune, &tiling_set_elsewhere, &o);
  return o;
}

void check_number_spellings(CLI::App& app) {
  for (CLI::Option* o : app.get_options()) {
    const std::string type = base_type(*o);
    if (type == "UINT" || type == "INT") o->transform(decimal_digits_only(type == "INT"));
    if (type == "FLOAT") o->check(CLI::Validator(not_nan, ""));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) check_number_spellings(*sub);
}

std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> items;
  for (size_t begin = 0;;) {
    const size_t end = std::min(list.find(',', begin), list.size());
    items.push_back(list.substr(begin, end - begin));
    if (end == list.size()) return items;
    begin = end + 1;
  }
}

std::vector<uint32_t> parse_uint32_list(const std::string& list, const std::string& option, const std::string& what) {
  const std::vector<std::string> items = split_list(list);
  std::vector<uint32_t> values;
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string& item = items[i];
    auto refuse = [&](const std::string& why) {
      const std::string where = items.size() > 1 ? " (item " + std::to_string(i + 1) + " of '" + list + "')" : "";
      throw Error(option + ": '" + item + "'" + where + " is not a " + what + why);
    };
    uint32_t v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec == std::errc::result_out_of_range) refuse(": it is more than 4294967295");
    if (item.empty() || ec != std::errc() || end != item.data() + item.size())
      refuse(" (a whole number from 0 to 4294967295 in decimal; a list separates them with single commas)");
    values.push_back(v);
  }
  return values;
}

uint32_t needed_context(uint64_t positions, const std::string& from) {
  if (positions > UINT32_MAX)
    throw Error(from + " need a context of " + std::to_string(positions) +
                " positions, more than the 4294967295 a context holds");
  return uint32_t(positions);
}

CLI::Validator output_file() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        if (path.empty()) return "the path is empty";
        if (is_a_directory(path)) return "'" + path + "' is a directory, not a file";
        const std::filesystem::path dir = std::filesystem::path(path).parent_path();
        if (!dir.empty() && !is_a_directory(dir))
          return "'" + path + "': there is no directory '" + dir.string() + "' to write it in";
        return {};
      },
      "");
}

CLI::Validator input_file() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        return is_a_directory(path) ? "'" + path + "' is a directory, not a file" : std::string();
      },
      "");
}

CLI::Validator output_directory() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        std::error_code ec;
        if (path.empty()) return "the path is empty";
        if (std::filesystem::exists(path, ec) && !is_a_directory(path))
          return "'" + path + "' is a file, not a directory";
        return {};
      },
      "");
}

std::ofstream open_output(const std::string& path, const std::string& option) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw Error(option + " '" + path + "': cannot open it for writing: " + system_reason());
  return out;
}

void close_output(std::ofstream& out, const std::string& path, const std::string& option) {
  out.close();
  if (!out) throw Error(option + " '" + path + "': cannot write it: " + system_reason());
}

void print_json(const nlohmann::json& j) { std::cout << j.dump(2) << "\n"; }

}  // namespace spindle::cli

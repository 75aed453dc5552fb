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

CLI::Option* add_graph_file_option(CLI::App& cmd, std::string& file, const std::string& help,
                                   const std::vector<CLI::Option*>& build_options) {
  CLI::Option* graph = cmd.add_option("--graph,-g", file, help)->type_name("FILE")->check(input_file());
  for (CLI::Option* o : build_options) graph->excludes(o);
  return graph;
}

void add_graph_source_options(CLI::App& cmd, GraphSource& source, const std::string& context_when_zero) {
  add_graph_file_option(cmd, source.file,
                        "run the graph saved in this .sptg file (spindle graph save) with --model's weights instead "
                        "of building one; refused when it was built for another model or shape, or when the run "
                        "needs more positions than its context; --tune's tiling knobs are refused with it",
                        {add_context_option(cmd, source.context, context_when_zero)});
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
  cmd.add_option("--watchdog-ms", flags.watchdog_ms,
                 "a dependency wait longer than this is an error naming the task")
      ->capture_default_str();
  cmd.add_option("--device", flags.device,
                 "vulkan only: the device's index as `spindle info` lists them; -1 = the first usable "
                 "discrete GPU, else integrated, else the CPU")
      ->capture_default_str();
  add_device_split_options(cmd, flags.split);
}

std::vector<CLI::Option*> add_device_split_options(CLI::App& cmd, DeviceSplit& split) {
  CLI::Option* devices =
      add_ranged_option(cmd, "--devices", split.devices,
                        "devices the step is split over (docs/multi-device.md): each runs its share of the kv and "
                        "GDN heads and of the MLP, expert and LM-head rows, and the row-parallel projections' pieces "
                        "are exchanged; above 1 only the CPU executors run it, simulating the devices (threaded: "
                        "--workers threads each)",
                        1, Graph::kMaxDevices);
  CLI::Option* expert_parallel =
      cmd.add_flag("--expert-parallel", split.expert_parallel,
                   "with --devices above 1: each device holds whole routed experts (the devices must divide them) "
                   "and computes the slots routed to its own, instead of its share of every slot's rows; the "
                   "slots' rows are exchanged and summed in slot order on every device");
  return {devices, expert_parallel};
}

ExecutorOptions executor_options(const ExecutorFlags& flags) {
  ExecutorOptions o;
  o.kind = parse_executor_kind(flags.executor);
  o.workers = flags.workers;
  o.schedule = parse_schedule_kind(flags.schedule);
  o.watchdog_ms = flags.watchdog_ms;
  o.device = flags.device;
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

// Runs the built `spindle` binary (SPINDLE_CLI_PATH) and captures what it printed.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

namespace spindle::test {

struct CliResult {
  int status = -1;
  std::string out, err;
  bool err_has(const std::string& s) const { return err.find(s) != std::string::npos; }
  bool out_has(const std::string& s) const { return out.find(s) != std::string::npos; }
};

// A fresh directory, removed with everything in it.
struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    static int n = 0;
    path = std::filesystem::temp_directory_path() /
           ("spindle-cli-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() { std::filesystem::remove_all(path); }
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// `args` is appended to the binary's path as shell words; `shell_before` (e.g. "ulimit -v N;")
// runs first in the same shell.
inline CliResult run_cli(const std::string& args, const std::string& shell_before = "") {
  ScratchDir dir;
  const auto out = dir.path / "out", err = dir.path / "err";
  const std::string cmd = shell_before + std::string(SPINDLE_CLI_PATH) + " " + args + " >" + out.string() +
                          " 2>" + err.string();
  const int raw = std::system(cmd.c_str());
  CliResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// What a command that must succeed prints with --json, parsed.
inline nlohmann::json run_json(const std::string& args) {
  const CliResult r = run_cli(args + " --json");
  CAPTURE(args);
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.out);
}

// An error the command reports itself: "spindle: error: " and each phrase, exit status 2.
inline void check_error(const std::string& args, std::initializer_list<const char*> phrases) {
  const CliResult r = run_cli(args);
  CAPTURE(args);
  CAPTURE(r.err);
  CHECK(r.status == 2);
  CHECK(r.err_has("spindle: error: "));
  for (const char* p : phrases) CHECK(r.err_has(p));
}

// A usage error, which CLI11 reports as the command line is parsed: its message with the
// phrase, a pointer to --help, exit status 2.
inline void check_usage_error(const std::string& args, const std::string& phrase) {
  const CliResult r = run_cli(args);
  CAPTURE(args);
  CAPTURE(r.err);
  CHECK(r.status == 2);
  CHECK(r.err_has(phrase));
  CHECK(r.err_has("Run with --help for more information."));
}

}  // namespace spindle::test

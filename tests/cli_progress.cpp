// The progress bar of weights generated or converted: drawn on a terminal, never into a pipe.
#include <cstdio>
#include <filesystem>
#include <string>

#include "cli_run.h"

using namespace spindle::test;

namespace {

const std::filesystem::path kFixtures = SPINDLE_FIXTURES_DIR;

// What the shell command writes to stdout, read through a pipe; it must exit 0.
std::string read_pipe(const std::string& cmd) {
  FILE* pipe = ::popen(cmd.c_str(), "r");
  REQUIRE(pipe);
  std::string text;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) text.append(buf, n);
  CHECK(::pclose(pipe) == 0);
  return text;
}

std::string spindle(const std::string& args) { return std::string(SPINDLE_CLI_PATH) + " " + args; }

// What the command writes to stderr, read through a pipe (stdout discarded).
std::string stderr_through_pipe(const std::string& args) { return read_pipe(spindle(args) + " 2>&1 >/dev/null"); }

void check_no_bar(const std::string& err) {
  CAPTURE(err);
  CHECK(err.find('\r') == std::string::npos);
  CHECK(err.find('\033') == std::string::npos);
  CHECK(err.find("GB/s") == std::string::npos);
  CHECK(err.find("[#") == std::string::npos);
  CHECK(err.find("[.") == std::string::npos);
}

// What the command writes to stderr when that is a terminal: script(1) runs it on a
// pseudo-terminal and, with stdout discarded, what comes back is stderr.
std::string stderr_on_terminal(const std::string& args) {
  return read_pipe("script -qec '" + spindle(args) + " >/dev/null' /dev/null");
}

}  // namespace

TEST_CASE("no progress bar when stderr is a pipe: synthetic weights generated") {
  ScratchDir dir;
  check_no_bar(stderr_through_pipe("synth tiny -o " + (dir.path / "ckpt").string()));
  check_no_bar(stderr_through_pipe("run --model synthetic:tiny --prompt-ids 1,2 -n 2 -e sequential"));
}

TEST_CASE("no progress bar when stderr is a pipe: a checkpoint's experts fused and converted to bf16") {
  check_no_bar(stderr_through_pipe("run --model " + (kFixtures / "qwen3-moe-tiny").string() +
                                   " --prompt-ids 1,2 -n 2 -e sequential"));
}

// The tiny models are ready within the first redraw interval, so the bar is only erased: the
// erase shows that the terminal was recognised and the bar made.
TEST_CASE("on a terminal the bar is erased when the weights are ready") {
  ScratchDir dir;
  CHECK(stderr_on_terminal("synth tiny -o " + (dir.path / "ckpt").string()).find("\r\033[K") != std::string::npos);
  CHECK(stderr_on_terminal("run --model " + (kFixtures / "qwen3-moe-tiny").string() +
                           " --prompt-ids 1,2 -n 2 -e sequential")
            .find("\r\033[K") != std::string::npos);
}

// The CLI's help and its answers to bad input: a message naming the problem, exit status 2.
#include <doctest/doctest.h>

#include "cli_run.h"
#include "host/executor.h"

using spindle::test::CliResult;
using spindle::test::run_cli;

namespace {

void check_error(const std::string& args, std::initializer_list<const char*> phrases) {
  const CliResult r = run_cli(args);
  CAPTURE(args);
  CAPTURE(r.err);
  CHECK(r.status == 2);
  CHECK(r.err_has("spindle: error: "));
  for (const char* p : phrases) CHECK(r.err_has(p));
}

}  // namespace

TEST_CASE("--help lists the commands and exits 0") {
  const CliResult r = run_cli("--help");
  CHECK(r.status == 0);
  for (const char* cmd : {"run", "gate", "graph", "synth", "info"}) CHECK(r.out_has(cmd));
}

TEST_CASE("each command has help naming its options") {
  CHECK(run_cli("run --help").out_has("--prompt-ids"));
  CHECK(run_cli("run --help").out_has("--schedule"));
  CHECK(run_cli("gate md5 --help").out_has("--expect"));
  CHECK(run_cli("gate kl --help").out_has("--ref-executor"));
  CHECK(run_cli("graph dump --help").out_has("--graph"));
  CHECK(run_cli("graph save --help").out_has("--out"));
  CHECK(run_cli("synth --help").out_has("tiny"));  // the presets are listed
  CHECK(run_cli("info --help").out_has("--json"));
}

TEST_CASE("no command is a usage error") { CHECK(run_cli("").status != 0); }

TEST_CASE("a prompt item that is not a number is named") {
  check_error("run --model synthetic:tiny --prompt-ids 1,x7,3", {"--prompt-ids", "'x7'"});
  check_error("run --model synthetic:tiny --prompt-ids 1,,3", {"--prompt-ids", "''"});
  check_error("run --model synthetic:tiny --prompt-ids 1,-2", {"'-2'"});
  check_error("run --model synthetic:tiny --prompt-ids 4294967296", {"'4294967296'"});
  check_error("gate kl --model synthetic:tiny --ids 1,two --ref-executor fp64",
              {"--ids", "'two'"});
}

TEST_CASE("a token id past the vocab names the id and the vocab size") {
  check_error("run --model synthetic:tiny --prompt-ids 1,99999", {"99999", "512"});
  check_error("gate md5 --model synthetic:tiny --prompt-ids 512", {"512 at index 0", "512 tokens"});
  check_error("gate kl --model synthetic:tiny --ids 3,600 --ref-executor fp64", {"600", "512"});
}

TEST_CASE("unknown executor and schedule names list the valid ones") {
  check_error("run --model synthetic:tiny --executor gpu",
              {"'gpu'", "sequential", "fp64", "threaded"});
  check_error("run --model synthetic:tiny --schedule fifo", {"'fifo'", "ticket", "static"});
  check_error("gate kl --model synthetic:tiny --ids 1,2 --ref-executor fp128", {"'fp128'", "fp64"});
}

TEST_CASE("an unknown model") {
  check_error("run --model synthetic:nope", {"'nope'", "tiny"});
  check_error("info --model /no/such/dir", {"/no/such/dir"});
}

TEST_CASE("the KL gate needs a reference") {
  check_error("gate kl --model synthetic:tiny --ids 1,2,3", {"--ref", "--ref-executor"});
}

TEST_CASE("a missing graph file") {
  check_error("graph dump --graph /no/such/file.sptg",
              {"/no/such/file.sptg", "no such graph file"});
}

TEST_CASE("a context too small for the run") {
  check_error("run --model synthetic:tiny --prompt-ids 1,2,3 --max-new-tokens 8 --context 4",
              {"context"});
}

TEST_CASE("CLI11 reports malformed options itself") {
  const CliResult r = run_cli("run --no-such-option");
  CHECK(r.status != 0);
  CHECK(r.status != 2);
  CHECK(r.err_has("--no-such-option"));
}

TEST_CASE("a shared-memory size above 227 KiB (a block's on the H200) is refused, naming the option and range") {
  for (const std::string option : {"--cuda-preload-kb", "--cuda-copy-ahead-kb", "--cuda-attn-kv-kb", "--cuda-attn-score-kb"}) {
    CAPTURE(option);
    CHECK(run_cli("bench --help").out_has(option));
    const CliResult r = run_cli("bench --model synthetic:tiny " + option + " 228");
    CHECK(r.status != 0);
    CHECK(r.err_has(option));
    CHECK(r.err_has("not in range 0 to 227"));
  }
}

TEST_CASE("--cuda-blocks-per-sm other than 1 or 2 is refused, naming the option") {
  CHECK(run_cli("bench --help").out_has("--cuda-blocks-per-sm"));
  for (const std::string value : {"0", "3"}) {
    CAPTURE(value);
    const CliResult r = run_cli("bench --model synthetic:tiny --cuda-blocks-per-sm " + value);
    CHECK(r.status != 0);
    CHECK(r.err_has("--cuda-blocks-per-sm"));
    CHECK(r.err_has("not in range 1 to 2"));
  }
}

TEST_CASE("--cuda-l2-prefetch-mb above 1024 is refused, naming the option and range") {
  CHECK(run_cli("bench --help").out_has("--cuda-l2-prefetch-distance"));
  const CliResult r = run_cli("bench --model synthetic:tiny --cuda-l2-prefetch-mb 1025");
  CHECK(r.status != 0);
  CHECK(r.err_has("--cuda-l2-prefetch-mb"));
  CHECK(r.err_has("not in range 0 to 1024"));
}

TEST_CASE("--cuda-l2-prefetch-mb takes auto or a number of MiB; another word is refused, naming the option") {
  CHECK(run_cli("bench --help").out_has("auto = 2 MiB per 1024 of the model's hidden size"));
  for (const std::string value : {"auto", "0", "3"}) {
    CAPTURE(value);
    CHECK(run_cli("bench --model synthetic:tiny -e threaded --positions 0 --tokens 1 --reps 1 --cuda-l2-prefetch-mb " +
                  value)
              .status == 0);
  }
  const CliResult r = run_cli("bench --model synthetic:tiny --cuda-l2-prefetch-mb lots");
  CHECK(r.status != 0);
  CHECK(r.err_has("--cuda-l2-prefetch-mb"));
  CHECK(r.err_has("not in {auto}"));
}

TEST_CASE("--executor cuda on a machine without a usable GPU says so") {
  if (spindle::best_executor_kind() == spindle::ExecutorKind::Cuda) {
    CHECK(run_cli("run --model synthetic:tiny --max-new-tokens 2 --executor cuda").status == 0);
    return;
  }
  const CliResult r = run_cli("run --model synthetic:tiny --max-new-tokens 2 --executor cuda");
  CHECK(r.status == 2);
  CHECK((r.err_has("no usable GPU here") || r.err_has("this build has no CUDA executor")));
}

TEST_CASE("--steps-per-launch is listed and takes a number of steps; a word is refused, naming the option") {
  CHECK(run_cli("run --help").out_has("--steps-per-launch"));
  CHECK(run_cli("bench --help").out_has("--steps-per-launch"));
  CHECK(run_cli("run --model synthetic:tiny -e threaded --prompt-ids 1,2 -n 3 --steps-per-launch 2").status == 0);
  const CliResult r = run_cli("run --model synthetic:tiny --steps-per-launch many");
  CHECK(r.status != 0);
  CHECK(r.err_has("--steps-per-launch"));
}

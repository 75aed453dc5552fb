// The CLI at the edges of its numbers and paths: sums that would pass 2^32, thread counts the
// system cannot give, paths that cannot be written: each refused with a message naming the
// option and the real numbers, exit status 2, never a wrapped value or an abort.
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "cli_run.h"

using nlohmann::json;
using spindle::test::check_error;
using spindle::test::check_usage_error;
using spindle::test::CliResult;
using spindle::test::run_cli;
using spindle::test::ScratchDir;

TEST_CASE("a context summed from command-line numbers past 2^32 - 1 is refused quoting them, not wrapped") {
  check_error("run --model synthetic:tiny -n 4294967295",
              {"a prompt of 4 tokens and --max-new-tokens 4294967295 need a context of 4294967299 positions, more "
               "than the 4294967295 a context holds"});
  check_error("gate md5 --model synthetic:tiny --prompt-ids 1,2 -n 4294967295", {"need a context of 4294967297"});
  check_error("trace export --model synthetic:tiny --position 4294967294",
              {"--position 4294967294, a prompt of 4 tokens and --max-new-tokens 4 need a context of 4294967302"});
  check_error("bench --model synthetic:tiny --positions 0,4294967290 --tokens 10",
              {"--positions up to 4294967290 and --tokens 10 need a context of 4294967301"});
  check_error("bench --model synthetic:tiny --tokens 4294967295", {"--tokens 4294967295 need a context of 4294967296"});
}

TEST_CASE("a context within 2^32 but past the model's is refused naming both") {
  check_error("run --model synthetic:tiny --context 4294967295", {"context 4294967295", "limit 256"});
  check_error("trace export --model synthetic:tiny --position 4294967000", {"context 4294967008", "limit 256"});
  check_error("run --model synthetic:tiny -n 4294967291", {"context 4294967295", "limit 256"});
}

TEST_CASE("steps-per-launch at its extremes leaves the CPU executors' tokens as they are") {
  const std::string run = "run --model synthetic:tiny -e threaded --prompt-ids 1,2 -n 5 --json --tune steps-per-launch=";
  auto tokens = [&](const std::string& steps) {
    const CliResult r = run_cli(run + steps);
    REQUIRE(r.status == 0);
    return json::parse(r.out).at("tokens");
  };
  CHECK(tokens("1") == tokens("0"));
  CHECK(tokens("4294967295") == tokens("0"));
  check_error(run + "4294967296", {"--tune steps-per-launch=4294967296: '4294967296' is not a whole number from 0 "
                                   "to 4294967295"});
}

TEST_CASE("--workers past the threaded executor's 4096 threads is refused, naming the option and the limit") {
  check_error("run --model synthetic:tiny -e threaded --workers 1000000",
              {"threaded executor: --workers 1000000 is more than 4096, the most threads it starts"});
}

TEST_CASE("a worker thread the system cannot start is an error naming it, not an abort") {
  // 1 GiB of address space holds a few hundred threads' stacks, not 4096.
  const CliResult r =
      run_cli("run --model synthetic:tiny -e threaded --workers 4096 --prompt-ids 1 -n 1", "ulimit -v 1048576; ");
  CAPTURE(r.err);
  CHECK(r.status == 2);
  CHECK(r.err_has("spindle: error: threaded executor: cannot start worker thread "));
  CHECK(r.err_has(" of 4096: "));
  CHECK(!r.err_has("terminate"));
}

TEST_CASE("an output or input path that cannot be used is refused before any work, naming the option and path") {
  ScratchDir dir;
  const std::string d = dir.path.string(), missing = d + "/no/such/dir/x";
  check_usage_error("trace export --model synthetic:tiny -o " + d, "--out: '" + d + "' is a directory, not a file");
  check_usage_error("trace export --model synthetic:tiny -o " + missing,
                    "--out: '" + missing + "': there is no directory '" + d + "/no/such/dir' to write it in");
  check_usage_error("trace export --model synthetic:tiny -o " + d + "/t.json --csv " + d,
                    "--csv: '" + d + "' is a directory, not a file");
  check_usage_error("trace export --model synthetic:tiny -o ''", "--out: the path is empty");
  check_usage_error("graph save --model synthetic:tiny -o " + d, "--out: '" + d + "' is a directory, not a file");
  check_usage_error("graph dump --model synthetic:tiny -o " + missing,
                    "--out: '" + missing + "': there is no directory");
  check_usage_error("graph dump --graph " + d, "--graph: '" + d + "' is a directory, not a file");
  check_usage_error("gate kl --model synthetic:tiny --ids 1,2 --ref " + d,
                    "--ref: '" + d + "' is a directory, not a file");
  const std::string file = d + "/t.json";
  REQUIRE(run_cli("trace export --model synthetic:tiny -e sequential -n 1 --copy-gib 0.001 -o " + file).status == 0);
  check_usage_error("synth tiny -o " + file, "--out: '" + file + "' is a file, not a directory");
}

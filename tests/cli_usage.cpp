// The CLI's help and its answers to bad input: a message naming the problem, exit status 2.
#include <doctest/doctest.h>

#include <string>
#include <utility>

#include "cli_run.h"
#include "host/executor.h"

using spindle::test::check_error;
using spindle::test::check_usage_error;
using spindle::test::CliResult;
using spindle::test::run_cli;

TEST_CASE("--help lists the commands, states the exit codes and exits 0") {
  const CliResult r = run_cli("--help");
  CHECK(r.status == 0);
  for (const char* cmd : {"run", "gate", "graph", "synth", "info", "bench", "trace"}) CHECK(r.out_has(cmd));
  CHECK(r.out_has("Exit status: 0 success, 1 a gate failed, 2 an error (a usage error included)."));
  for (const char* cmd :
       {"run", "gate md5", "gate kl", "graph dump", "graph save", "synth", "info", "bench", "trace export"})
    CHECK(run_cli(std::string(cmd) + " --help").status == 0);
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

TEST_CASE("every command whose output a script reads offers --json (graph dump prints JSON already)") {
  for (const char* cmd : {"run", "tokenize", "detokenize", "gate md5", "gate kl", "graph save", "synth", "info", "bench",
                          "trace export"}) {
    CAPTURE(cmd);
    CHECK(run_cli(std::string(cmd) + " --help").out_has("--json"));
  }
}

TEST_CASE("every usage error of every command exits 2 with CLI11's message and a pointer to --help") {
  check_usage_error("", "A subcommand is required");
  check_usage_error("gate", "A subcommand is required");
  check_usage_error("graph", "A subcommand is required");
  check_usage_error("trace", "A subcommand is required");
  check_usage_error("run --no-such-option", "--no-such-option");
  check_usage_error("gate md5 extra", "extra");
  check_usage_error("run -n many", "--max-new-tokens");
  check_usage_error("gate kl --model synthetic:tiny --ref-executor fp64", "--ids is required");
  check_usage_error("graph save --model synthetic:tiny", "--out is required");
  check_usage_error("graph dump --graph g.sptg --model synthetic:tiny", "excludes");
  check_usage_error("synth", "preset is required");
  check_usage_error("info --context -1", "--context");
  check_usage_error("bench --reps 0", "--reps");
  check_usage_error("trace export --copy-gib 100", "--copy-gib");
}

TEST_CASE("each list option names itself, the item and what the items are when one is not a number") {
  struct ListOption {
    std::string command, option, what;
  };
  const ListOption options[] = {
      {"run --model synthetic:tiny", "--prompt-ids", "token id"},
      {"gate md5 --model synthetic:tiny", "--prompt-ids", "token id"},
      {"trace export --model synthetic:tiny", "--prompt-ids", "token id"},
      {"gate kl --model synthetic:tiny --ref-executor fp64", "--ids", "token id"},
      {"bench --model synthetic:tiny", "--positions", "position"},
  };
  // the value as a shell word, the item the message quotes
  const std::pair<std::string, std::string> bad[] = {
      {"''", "''"},         {",", "'' (item 1 of ',')"}, {"1,,2", "'' (item 2 of '1,,2')"},
      {"-1", "'-1'"},       {"1e3", "'1e3'"},            {"99999999999999999999", "'99999999999999999999'"},
      {"' 1'", "' 1'"},     {"0x10", "'0x10'"},          {"1,abc", "'abc' (item 2 of '1,abc')"},
  };
  for (const ListOption& o : options)
    for (const auto& [value, item] : bad) {
      const std::string args = o.command + " " + o.option + " " + value;
      CAPTURE(args);
      const CliResult r = run_cli(args);
      CAPTURE(r.err);
      CHECK(r.status == 2);
      CHECK(r.err_has(o.option + ": " + item + " is not a " + o.what));
    }
  CHECK(run_cli("bench --model synthetic:tiny --positions 4294967296").err_has("more than 4294967295"));
  check_error("bench --model synthetic:tiny --modes megakernel,,graph", {"--modes: unknown CUDA mode ''"});
  check_error("bench --model synthetic:tiny --modes fast", {"--modes: unknown CUDA mode 'fast'", "per-op"});
}

TEST_CASE("whole-number options read decimal, as the lists do, and real-number ones refuse NaN") {
  const std::string not_decimal = " is not a whole number from 0 in decimal";
  check_usage_error("run --model synthetic:tiny --workers 0x10", "--workers: '0x10'" + not_decimal);
  check_usage_error("info --model synthetic:tiny --context ' 5'", "--context: ' 5'" + not_decimal);
  check_usage_error("run --model synthetic:tiny -n 1e3", "--max-new-tokens: '1e3'" + not_decimal);
  check_error("bench --model synthetic:tiny --tune cuda-l2-prefetch-mb=0x10", {"'0x10' is not a whole number"});
  check_usage_error("bench --model synthetic:tiny --copy-gib nan", "--copy-gib: 'nan' is not a number");
  check_usage_error("run --model synthetic:tiny --temperature nan", "--temperature: 'nan' is not a number");
  check_usage_error("run --model synthetic:tiny --temperature -1", "--temperature: '-1' is below 0");
  check_usage_error("run --model synthetic:tiny --top-p 2", "--top-p");
  check_usage_error("run --model synthetic:tiny --seed -1", "--seed: '-1'" + not_decimal);
  check_usage_error("run --model synthetic:tiny --seed 18446744073709551616",
                    "--seed: '18446744073709551616' does not fit in 64 bits");
  check_usage_error("gate md5 --model synthetic:tiny --expect zz", "--expect: 'zz' is not an md5 (32 hex digits)");
  CHECK(run_cli("run --model synthetic:tiny -e sequential --device -1 --prompt-ids 1 -n 1").status == 0);
  // CLI11 alone reads 010 as 8
  const CliResult r = run_cli("info --model synthetic:tiny --context 010 --json");
  CHECK(r.status == 0);
  CHECK(r.out_has("\"context\": 10,"));
}

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

TEST_CASE("a shared-memory size above 227 KiB (a block's on the H200) is refused, naming the knob and range") {
  for (const std::string knob : {"cuda-preload-kb", "cuda-attn-kv-kb", "cuda-attn-score-kb"}) {
    CAPTURE(knob);
    CHECK(run_cli("tune --list").out_has(knob + "=0 to 227 (KiB of a block's shared memory)"));
    check_error("bench --model synthetic:tiny --tune " + knob + "=228",
                {("--tune " + knob + "=228: '228' is not a whole number from 0 to 227").c_str()});
  }
}

TEST_CASE("cuda-blocks-per-sm other than 1 or 2 is refused, naming the knob") {
  for (const std::string value : {"0", "3"}) {
    CAPTURE(value);
    check_error("bench --model synthetic:tiny --tune cuda-blocks-per-sm=" + value,
                {("--tune cuda-blocks-per-sm=" + value + ": '" + value + "' is not a whole number from 1 to 2").c_str()});
  }
}

TEST_CASE("cuda-l2-prefetch-mb takes auto or a number of MiB to 1024, others are refused, naming the knob") {
  CHECK(run_cli("tune --list").out_has("auto = 2 per 1024 of the hidden size"));
  for (const std::string value : {"auto", "0", "3"}) {
    CAPTURE(value);
    CHECK(run_cli("bench --model synthetic:tiny -e threaded --positions 0 --tokens 1 --reps 1 --tune cuda-l2-prefetch-mb=" +
                  value)
              .status == 0);
  }
  for (const std::string value : {"1025", "lots"})
    check_error("bench --model synthetic:tiny --tune cuda-l2-prefetch-mb=" + value,
                {("--tune cuda-l2-prefetch-mb=" + value + ": '" + value + "' is not a whole number from 0 to 1024; "
                  "cuda-l2-prefetch-mb takes auto or 0 to 1024").c_str()});
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

TEST_CASE("steps-per-launch is listed and takes a number of steps, a word is refused, naming the knob") {
  CHECK(run_cli("tune --list").out_has("steps-per-launch=0 to 4294967295 (default 0; executor)"));
  CHECK(run_cli("run --model synthetic:tiny -e threaded --prompt-ids 1,2 -n 3 --tune steps-per-launch=2").status == 0);
  check_error("run --model synthetic:tiny --tune steps-per-launch=many", {"--tune steps-per-launch=many: 'many'"});
}

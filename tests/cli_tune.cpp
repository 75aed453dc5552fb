// --profile, --tune and `spindle tune --list`.
#include <set>

#include "tests/cli_run.h"

using spindle::test::run_cli;
using spindle::test::run_json;

TEST_CASE("tune --list names every knob once, marking those that change the bits") {
  const nlohmann::json list = run_json("tune --list");
  std::set<std::string> names;
  for (const auto& k : list) {
    CHECK(names.insert(k["name"].get<std::string>()).second);
    for (const char* field : {"sets", "values", "default", "what", "measured"}) CHECK(!k[field].get<std::string>().empty());
  }
  CHECK(names.size() == 24);
  for (const auto& k : list) {
    const std::string name = k["name"];
    const bool bits = name == "attn-chunks" || name == "o-proj-split" || name == "down-split" || name == "fused-mlp" ||
                      name == "gdn-out-split" || name == "expert-down-split" ||
                      name == "shared-down-split";
    CHECK_MESSAGE(k["changes_bits"].get<bool>() == bits, name);
  }
  const auto text = run_cli("tune --list");
  CHECK(text.status == 0);
  CHECK(text.out_has("o-proj-split=PIECES[/GROUP], each up to 65535 (default 0; tiling) CHANGES THE BITS"));
}

TEST_CASE("--tune refuses what is not a knob's KEY=VALUE, naming the key and its values") {
  const std::string run = "run -e sequential -n 1 ";
  auto refused = [&](const std::string& args, const std::string& message) {
    const auto r = run_cli(run + args);
    CHECK(r.status == 2);
    CHECK_MESSAGE(r.err_has(message), r.err);
  };
  refused("--tune oops", "--tune 'oops': not KEY=VALUE");
  refused("--tune =3", "--tune '=3': not KEY=VALUE");
  refused("--tune nope=1", "--tune nope=1: no knob 'nope'; the knobs are rows-per-tile, stage-tasks");
  refused("--tune cuda-blocks-per-sm=3", "'3' is not a whole number from 1 to 2; cuda-blocks-per-sm takes 1 or 2");
  refused("--tune stage-tasks=0", "'0' is not a whole number from 1 to 1048576");
  refused("--tune kv-head-waits=yes", "'yes' is not on or off; kv-head-waits takes on or off");
  refused("--tune o-proj-split=8/x", "'8/x' is not PIECES or PIECES/GROUP");
  refused("--tune cuda-l2-prefetch-mb=2000", "cuda-l2-prefetch-mb takes auto or 0 to 1024");
}

TEST_CASE("run --json and bench --json name the profile and its choice") {
  const auto run = run_json("run -e threaded -n 1 --profile plain");
  CHECK(run["profile"] == "plain");
  CHECK(run["profile_choice"] == "profile plain: threaded on the default tiling");
  const auto bench = run_json("bench -e threaded --positions 0 --tokens 1 --reps 1");
  CHECK(bench["profile"] == "fastest");
  CHECK(bench["profile_choice"].get<std::string>().find("profile fastest: threaded") == 0);
}

TEST_CASE("--profile names its choice, the cpu executors have one configuration") {
  const auto fastest = run_cli("run -e threaded -n 2");
  CHECK(fastest.status == 0);
  CHECK(fastest.err_has("spindle: profile fastest: threaded on the default tiling (no faster configuration measured "
                        "for this executor)"));
  const auto plain = run_cli("run -e threaded -n 2 --profile plain");
  CHECK(plain.err_has("spindle: profile plain: threaded on the default tiling"));
  for (const char* mode : {"per-op", "graph"}) {
    const auto r = run_cli(std::string("run -e sequential -n 2 --profile ") + mode);
    CHECK(r.status == 2);
    CHECK(r.err_has(std::string("--profile ") + mode + ": a cuda mode, and the executor is sequential"));
  }
  const auto unknown = run_cli("run -n 2 --profile fast");
  CHECK(unknown.status == 2);
  CHECK(unknown.err_has("--profile: no profile 'fast' (valid: fastest, plain, per-op, graph)"));
}

TEST_CASE("--tune's tiling knobs are refused with a saved graph") {
  spindle::test::ScratchDir dir;
  const std::string file = (dir.path / "g.sptg").string();
  REQUIRE(run_cli("graph save --context 8 -o " + file).status == 0);
  const auto r = run_cli("run -e sequential -n 1 --graph " + file + " --tune attn-chunks=2");
  CHECK(r.status == 2);
  CHECK(r.err_has("--tune attn-chunks=2: a tiling knob, and the graph is read from --graph " + file));
}

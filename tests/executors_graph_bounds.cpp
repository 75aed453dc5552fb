// validate() on graphs the builder made, then changed as a graph file could be: every op's reads
// and writes are checked against its views and the graph's dimensions (tasks/operand_bounds.h),
// and a graph it accepts runs inside its arenas (under the sanitizers, which CI runs this
// program with, a step past them is a failure).
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <string>

#include "tasks/error.h"
#include "tests/executors_fixture.h"

using namespace spindle;

namespace {

bool accepted(const Graph& g) { return error_of([&] { validate(g); }) == "(no error)"; }

void check_rejected(const Graph& g, std::initializer_list<const char*> phrases) {
  const std::string msg = error_of([&] { validate(g); });
  CAPTURE(msg);
  for (const char* phrase : phrases) CHECK(msg.find(phrase) != std::string::npos);
}

SpTask& first_task(Graph& g, uint32_t op) {
  const auto it = std::find_if(g.tasks.begin(), g.tasks.end(), [op](const SpTask& t) { return t.op == op; });
  REQUIRE(it != g.tasks.end());
  return *it;
}

}  // namespace

TEST_CASE("attention: its tiles, the KV cache, the RoPE table and the partials against the graph's dimensions") {
  const Graph built = tiny_model().graph;  // 4 q heads, 2 kv heads of 16, 3 chunks, context 64
  REQUIRE(accepted(built));
  Graph g = built;
  first_task(g, SP_OP_ATTENTION).tile_end = 7;
  check_rejected(g, {"(attention)", "its tiles end at 7, past the 6 (kv head, q-head split, chunk) tiles"});
  g = built;
  g.params.attn_q_splits = 3;
  check_rejected(g, {"attention q-head splits 3 do not divide a kv head's 2 q heads"});
  g = built;
  g.params.attn_q_splits = 0;
  check_rejected(g, {"attention q-head splits 0 do not divide"});
  g = built;
  g.params.attn_q_splits = 2;  // twice the tiles, and an arrivals word each
  first_task(g, SP_OP_ATTENTION).tile_end = 12;
  check_rejected(g, {"(attention)", "operand 7 'arrivals'"});
  g = built;
  g.views[first_task(g, SP_OP_ATTENTION).operand[3]].rows -= 1;
  check_rejected(g, {"(attention)", "operand 3 'kv_cache'", "is 255x16, smaller than the 256x16 K and V rows"});
  g = built;
  g.params.n_kv_heads = 3;
  check_rejected(g, {"4 q heads are not a whole number of groups of its 3 kv heads"});
  g = built;
  g.params.rotary_dim = 15;
  check_rejected(g, {"rotary dims 15 are not an even number at most its head dim 16"});
  g = built;
  g.params.attn_chunks = 4;
  check_rejected(g, {"(attention)", "operand 5 'partials'", "smaller than the 16x18 partial rows"});
  g = built;
  g.params.context = 65;
  check_rejected(g, {"arena 3", "fewer than the RoPE table's"});
  g = built;
  g.views[first_task(g, SP_OP_ATTENTION).operand[5]].row_stride += 1;
  check_rejected(g, {"(attention)", "operand 5 'partials' has rows of 18 elements 19 apart, not 18 back to back"});
  g = built;
  g.views[first_task(g, SP_OP_ATTENTION).operand[3]].arena = SP_ARENA_WEIGHTS0;
  check_rejected(g, {"(attention)", "operand 3 'kv_cache'", "is written, but lies in weight arena 6"});
  g = built;
  g.params.head_dim = 32;
  check_rejected(g, {"(attention)", "operand 0 'qkv'", "fewer than the 256 elements of the q, k and v heads"});
}

TEST_CASE("gate_up and gemv: both matrices read through the first one's row stride, the norm as long as a row") {
  const Graph built = tiny_model().graph;
  Graph g = built;
  g.views[first_task(g, SP_OP_GATE_UP).operand[1]].row_stride += 8;
  check_rejected(g, {"(gate_up)", "operand 1 'Wu'", "64 columns 72 apart", "the op reads both with the latter's"});
  g = built;
  g.views[first_task(g, SP_OP_GATE_UP).operand[3]].cols = 63;
  check_rejected(g, {"(gate_up)", "operand 3 'norm'", "holds 63 elements, fewer than the 64 norm weights"});
  g = built;
  SpTask& gemv = first_task(g, SP_OP_GEMV);
  REQUIRE(gemv.operand[2] != SP_NO_VIEW);
  g.views[gemv.operand[2]].dtype = SP_U32;
  check_rejected(g, {"(gemv)", "operand 2 'norm'", "is u32, not bf16"});
}

TEST_CASE("mlp gangs and gemv pieces: every operand's dtype and size") {
  Graph g = build_tiny({}, {}, {8, 4}).graph;
  REQUIRE(accepted(g));
  g.views[first_task(g, SP_OP_MLP).operand[4]].cols = 32;
  check_rejected(g, {"(mlp)", "the norm weights are fewer than H", "gang of 4"});
  g = build_tiny({}, {}, {8, 4}).graph;
  g.views[first_task(g, SP_OP_MLP).operand[1]].row_stride = 72;
  check_rejected(g, {"(mlp)", "up's rows are not as far apart as gate's"});
  g = build_tiny({2, 0}, {16, 4}, {}, true).graph;
  REQUIRE(accepted(g));
  g.views[first_task(g, SP_OP_GEMV_PIECE).operand[4]].dtype = SP_U32;
  check_rejected(g, {"(gemv_piece)", "the partials are not f32 rows"});
}

// Changes one word of a task or a view at random, many times over; validate() refuses the
// change or the step runs, inside the arenas (which the sanitizer build checks) and ending, at
// worst, with a clear error.
TEST_CASE("a graph changed at random is refused, or one step of it runs") {
  const TinyModel& tiny = tiny_model();
  std::mt19937 rng(58);
  uint32_t ran = 0;
  for (int round = 0; round < 400; ++round) {
    Graph g = tiny.graph;
    const bool task = rng() % 2;
    uint32_t* words = task ? reinterpret_cast<uint32_t*>(&g.tasks[rng() % g.tasks.size()])
                           : reinterpret_cast<uint32_t*>(&g.views[rng() % g.views.size()]);
    const uint32_t k = rng() % (task ? SP_TASK_WORDS : 8u);
    const uint32_t values[] = {0u, 1u, words[k] + 1, words[k] - 1, words[k] * 2, uint32_t(rng()), 0xFFFFFFFFu};
    words[k] = values[rng() % std::size(values)];
    if (!accepted(g)) continue;
    ++ran;
    auto ex = make_executor(g, tiny.weights, {ExecutorKind::Sequential});
    try {
      decode(*ex, g, {1}, 1, {});
    } catch (const Error&) {
    }
  }
  MESSAGE(ran << " of 400 changed graphs accepted and run");
  CHECK(ran > 0);
}

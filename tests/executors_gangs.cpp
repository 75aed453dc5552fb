// Gang tasks (tasks/gang.h) as the builder lays them out, and validate()'s refusal of every
// way a gang can be broken.
#include <doctest/doctest.h>

#include <string>

#include "tasks/gang.h"
#include "tests/executors_fixture.h"

using namespace spindle;

namespace {

void check_rejected(const Graph& g, const std::string& phrase) {
  const std::string msg = error_of([&] { validate(g); });
  CAPTURE(msg);
  CHECK(msg.find(phrase) != std::string::npos);
}

}  // namespace

TEST_CASE("the fused MLP: a stage a layer of pieces in gangs, ranks in order, tiles one after another") {
  const Graph& g = tiny_fused_mlp_model().graph;
  const uint32_t first = first_task(g, SP_OP_MLP);
  for (uint32_t j = 0; j < 16; ++j) {
    const SpTask& t = g.tasks[first + j];
    CAPTURE(j);
    CHECK(t.op == SP_OP_MLP);
    CHECK(t.signal_counter == g.tasks[first].signal_counter);
    CHECK(t.tile_begin == 8 * j);
    CHECK(t.tile_end == 8 * j + 8);
    CHECK(sp_gang_width(t) == 4);
    CHECK(t.gang_rank == j % 4);
  }
  CHECK(g.counter_names[g.tasks[first].signal_counter] == "L0.mlp");
  CHECK(g.tasks[first + 16].wait_counter == g.tasks[first].signal_counter);
  CHECK(g.tasks[first + 16].wait_count == 16);
}

TEST_CASE("validate() names a broken gang: a missing member, a bad rank, a member unlike its gang, an op that cannot gang") {
  const Graph& good = tiny_fused_mlp_model().graph;
  const uint32_t first = first_task(good, SP_OP_MLP);
  const std::string task = "task " + std::to_string(first);
  {
    Graph g = good;
    g.tasks.erase(g.tasks.begin() + first + 1);
    check_rejected(g, task + " (mlp) is rank 0 of a gang of 4, but rank 1 does not follow it");
  }
  {
    Graph g = good;
    g.tasks.erase(g.tasks.begin(), g.tasks.begin() + first + 1);  // the graph now starts at rank 1
    check_rejected(g, "task 0 (mlp) is rank 1 of a gang of 4, but rank 0 does not precede it");
  }
  {
    Graph g = good;
    g.tasks[first + 3].gang_rank = 7;
    check_rejected(g, "task " + std::to_string(first + 3) + " (mlp): the rank is not the piece's place in its gang");
  }
  {
    Graph g = good;
    g.tasks[first + 2].operand[4] = g.tasks[first + 2].operand[3];
    check_rejected(g, "task " + std::to_string(first + 2) + " (mlp), rank 2 of a gang of 4, is not rank 1's record");
  }
  {
    Graph g = good;
    g.tasks[first + 2].tile_begin += 32;  // still rank 2's place in a gang of 4
    g.tasks[first + 2].tile_end += 32;
    check_rejected(g, "is not rank 1's record with the next tiles of the same length");
  }
  {
    Graph g = good;
    g.tasks[first - 1].gang_width = 2;  // down's predecessor: o_proj, a GEMV
    check_rejected(g, "(gemv) is in a gang of 2, but its op cannot gang");
  }
  {
    Graph g = good;
    g.tasks[first - 1].gang_rank = 1;
    check_rejected(g, "(gemv) has rank 1 but is in no gang");
  }
  {
    Graph g = good;
    for (uint32_t j = 0; j < 16; ++j) g.tasks[first + j].operand[6] = g.tasks[first - 1].operand[3];
    check_rejected(g, task + " (mlp): the arrivals hold fewer u32 words than the gang has members");
  }
}

TEST_CASE("the builder refuses a fused MLP beside a down split") {
  BuildOptions o;
  o.context = 32;
  o.fused_mlp = {16, 4};
  o.down_split = {16, 4};
  const std::string msg = error_of([&] { build_decode_graph(tiny_model().weights, o); });
  CAPTURE(msg);
  CHECK(msg.find("the fused MLP sums down's dots itself") != std::string::npos);
}

#include <doctest/doctest.h>

#include <string>

#include "tasks/error.h"
#include "tasks/graph.h"
#include "tasks_fixture.h"

using namespace spindle;
using namespace spindle::test;

namespace {

// The message validate() throws, or "" when the graph is valid.
std::string validate_message(const Graph& g) {
  try {
    validate(g);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void check_rejected(const Graph& g, std::initializer_list<const char*> phrases) {
  const std::string msg = validate_message(g);
  CAPTURE(msg);
  REQUIRE(!msg.empty());
  for (const char* phrase : phrases) CHECK(msg.find(phrase) != std::string::npos);
}

}  // namespace

TEST_CASE("a consistent graph passes") { CHECK(validate_message(small_graph()) == ""); }

TEST_CASE("an unknown opcode is named with its task") {
  Graph g = small_graph();
  g.tasks[kTHead1].op = 99;
  check_rejected(g, {"task 2", "unknown opcode 99"});
}

TEST_CASE("a view operand out of range is named by task, operand and view") {
  Graph g = small_graph();
  g.tasks[kTHead1].operand[3] = 99;
  check_rejected(g, {"task 2 (gemv)", "operand 3 'out'", "view 99", "7 views"});
}

TEST_CASE("a required view operand cannot be absent; an optional one can") {
  Graph g = small_graph();
  g.tasks[kTHead0].operand[6] = SP_NO_VIEW;  // argmax partials are optional
  g.tasks[kTHead0].operand[5] = 0;
  CHECK(validate_message(g) == "");
  g.tasks[kTSample].operand[3] = SP_NO_VIEW;
  check_rejected(g, {"task 3 (sample)", "operand 3 'forced'", "needs a view"});
}

TEST_CASE("immediate operands are not checked as views") {
  Graph g = small_graph();
  g.tasks[kTSample].operand[2] = 12345;
  CHECK(validate_message(g) == "");
}

TEST_CASE("a GEMV split its rows cannot take is named with its task and the row length") {
  Graph g = small_graph();
  g.tasks[kTHead1].operand[7] = 2;  // 2 pieces of the lm_head's 4 columns: not whole octets
  check_rejected(g, {"task 2", "whole octets", "2 pieces", "4 columns"});
  g.tasks[kTHead1].operand[7] = 3;
  check_rejected(g, {"task 2", "do not divide the row length", "3 pieces"});
  g.tasks[kTHead1].operand[7] = 0;
  CHECK(validate_message(g) == "");
}

TEST_CASE("a view past its arena names the view and the arena") {
  Graph g = small_graph();
  g.views[kLmHead].rows += 1;
  check_rejected(g, {"view 2 'lm_head'", "arena 4 'weights0'", "past the"});
}

TEST_CASE("a view's extent counts the row stride") {
  Graph g = small_graph();
  g.views[kLogits].rows = 2;
  g.views[kLogits].row_stride = 0;  // two reads of the same row fit
  CHECK(validate_message(g) == "");
  g.views[kLogits].row_stride = 1000;
  check_rejected(g, {"view 3 'logits'", "arena 1 'work'"});
}

TEST_CASE("a view with a huge offset is caught, not wrapped around") {
  Graph g = small_graph();
  g.views[kHidden].offset_hi = 0xFFFFFFFFu;
  g.views[kHidden].offset_lo = 0xFFFFFFFFu;
  check_rejected(g, {"view 1 'hidden'"});
}

TEST_CASE("a view in a missing arena") {
  Graph g = small_graph();
  g.views[kTable].arena = 9;
  check_rejected(g, {"view 0 'embed_tokens'", "arena 9", "5 arenas"});
}

TEST_CASE("view names must match the views") {
  Graph g = small_graph();
  g.view_names.pop_back();
  check_rejected(g, {"7 views but 6 view names"});
}

TEST_CASE("io views must exist") {
  Graph g = small_graph();
  g.io.logits = 70;
  check_rejected(g, {"io.logits", "view 70"});
}

TEST_CASE("counters out of range") {
  Graph g = small_graph();
  g.tasks[kTSample].wait_counter = 3;
  check_rejected(g, {"task 3 (sample)", "waits on counter 3", "3 counters"});
  g = small_graph();
  g.tasks[kTEmbed].signal_counter = 7;
  check_rejected(g, {"task 0 (embed)", "signals counter 7"});
}

TEST_CASE("every task signals a counter") {
  Graph g = small_graph();
  g.tasks[kTSample].signal_counter = SP_NO_COUNTER;
  check_rejected(g, {"task 3 (sample)", "signals no counter"});
}

TEST_CASE("a wait count must equal the counter's signallers") {
  Graph g = small_graph();
  g.tasks[kTSample].wait_count = 1;
  check_rejected(g, {"task 3 (sample)", "waits for 1 signals of counter 1 'lm_head'",
                     "2 tasks signal it"});
  g = small_graph();
  g.tasks[kTHead1].signal_counter = kCSample;  // lm_head now has one signaller, sample two
  check_rejected(g, {"task 0 (embed) waits for 1 signals of counter 2 'sample'",
                     "2 tasks signal it"});
}

TEST_CASE("a same-step wait must come after every signaller") {
  Graph g = small_graph();
  std::swap(g.tasks[kTHead1], g.tasks[kTSample]);
  check_rejected(g, {"task 2 (sample)", "same step", "counter 1 'lm_head'", "task 3 (gemv)"});
}

TEST_CASE("a same-step wait on the counter a later task signals") {
  Graph g = small_graph();
  g.tasks[kTEmbed].wait_mode = SP_WAIT_SAME_STEP;
  check_rejected(g, {"task 0 (embed)", "same step", "counter 2 'sample'", "task 3 (sample)"});
}

TEST_CASE("an unknown wait mode") {
  Graph g = small_graph();
  g.tasks[kTEmbed].wait_mode = 5;
  check_rejected(g, {"task 0 (embed)", "wait mode 5"});
}

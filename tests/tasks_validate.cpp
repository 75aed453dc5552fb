#include <doctest/doctest.h>

#include <limits>
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

TEST_CASE("a required view operand cannot be absent, an optional one can") {
  Graph g = small_graph();
  g.tasks[kTHead0].operand[6] = SP_NO_VIEW;  // argmax partials are optional
  g.tasks[kTHead0].operand[5] = 0;
  CHECK(validate_message(g) == "");
  g.tasks[kTSample].operand[3] = SP_NO_VIEW;
  check_rejected(g, {"task 3 (sample)", "operand 3 'forced'", "needs a view"});
}

TEST_CASE("immediate operands are not checked as views") {
  Graph g = small_graph();
  REQUIRE(g.tasks[kTHead1].operand[5] >= g.views.size());  // flags: the argmax bit and slot 1
  CHECK(validate_message(g) == "");
  g.tasks[kTSample].operand[2] = 12345;  // but an immediate is checked for what it counts
  check_rejected(g, {"task 3 (sample)", "operand 1 'argmax' (view 4 'argmax') holds 4 elements",
                     "fewer than the 24690 words"});
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
  check_rejected(g, {"view 2 'lm_head'", "arena 6 'weights0'", "past the"});
}

TEST_CASE("a view's extent counts the row stride") {
  Graph g = small_graph();
  g.views[kLogits].rows = 2;
  g.views[kLogits].cols = 4;
  g.views[kLogits].row_stride = 8;  // 4 floats of gap, ending at the arena's end
  CHECK(validate_message(g) == "");
  g.views[kLogits].row_stride = 9;
  check_rejected(g, {"view 3 'logits'", "arena 1 'work'"});
}

TEST_CASE("a view's rows must not overlap, and its offset must be a whole number of elements") {
  Graph g = small_graph();
  g.views[kLogits].rows = 2;
  g.views[kLogits].cols = 4;
  g.views[kLogits].row_stride = 3;
  check_rejected(g, {"view 3 'logits'", "rows overlap", "4 columns 3 elements apart"});
  g = small_graph();
  g.views[kHidden].offset_lo = 1;
  check_rejected(g, {"view 1 'hidden'", "starts at byte 1", "2-byte elements"});
}

TEST_CASE("a task that would read or write past its views is named with the operand and the sizes") {
  Graph g = small_graph();
  g.tasks[kTHead1].tile_end += 1;
  check_rejected(g, {"task 2 (gemv)", "operand 0 'W' (view 2 'lm_head') is 8x4, smaller than the 9x4 rows"});
  g = small_graph();
  g.tasks[kTEmbed].tile_end += 1;
  check_rejected(g, {"task 0 (embed)", "operand 0 'table'", "smaller than the 1x5 columns the tiles copy"});
  g = small_graph();
  g.views[kHidden].cols = 2;  // x is shorter than W's rows
  g.tasks[kTEmbed].tile_end = 2;
  check_rejected(g, {"task 1 (gemv)", "operand 1 'x' (view 1 'hidden') holds 2 elements, fewer than the 4"});
  g = small_graph();
  g.tasks[kTHead1].operand[5] = 1u | 2u << 16;  // slot 2 of a view of 2 partials
  check_rejected(g, {"task 2 (gemv)", "operand 6 'argmax'", "fewer than the 6 words up to the argmax slot"});
  g = small_graph();
  g.tasks[kTHead1].operand[5] = 3;
  check_rejected(g, {"task 2 (gemv)", "operand 5 'flags' 3 sets bits 1..15"});
  g = small_graph();
  g.tasks[kTHead1].operand[6] = SP_NO_VIEW;
  check_rejected(g, {"task 2 (gemv)", "asks for an argmax partial, but operand 6 'argmax' names no view"});
  g = small_graph();
  g.tasks[kTHead1].operand[3] = kLmHead;
  check_rejected(g, {"task 2 (gemv)", "operand 3 'out' (view 2 'lm_head') is written, but lies in weight arena 6"});
  g = small_graph();
  g.tasks[kTSample].operand[2] = 0;
  check_rejected(g, {"task 3 (sample)", "operand 2 'partial_count' 0"});
}

TEST_CASE("an operand of the wrong dtype is named with both dtypes") {
  Graph g = small_graph();
  g.views[kHidden].dtype = SP_F32;
  check_rejected(g, {"task 0 (embed)", "operand 1 'out' (view 1 'hidden') is f32, not bf16"});
  g = small_graph();
  g.views[kArgmax].dtype = SP_BF16;
  check_rejected(g, {"task 1 (gemv)", "operand 6 'argmax' (view 4 'argmax') is bf16, not u32"});
}

TEST_CASE("the dimensions, fixed arenas and io views an executor relies on") {
  Graph g = small_graph();
  g.io.forced_tokens = SP_NO_VIEW;
  check_rejected(g, {"io.forced_tokens names no view"});
  g = small_graph();
  g.io.out_tokens = kLogits;
  check_rejected(g, {"io.out_tokens (view 3 'logits') is 8 f32, not at least 4 u32"});
  g = small_graph();
  g.params.vocab = 9;
  check_rejected(g, {"io.logits (view 3 'logits') is 8 f32, not at least 9 f32"});
  g = small_graph();
  g.views[kForced].arena = SP_ARENA_WORK;
  g.views[kForced].offset_lo = 0;
  g.views[kForced].cols = 2;
  g.params.max_steps = 2;
  check_rejected(g, {"io.forced_tokens is not in arena 0"});
  g = small_graph();
  g.arenas[SP_ARENA_STATE].bytes = 32;
  g.views[kForced].offset_lo = 0;
  g.views[kForced].cols = 4;
  g.views[kOut].offset_lo = 16;
  g.views[kOut].cols = 4;
  check_rejected(g, {"arena 0 'state' has 32 bytes, fewer than the step state's 64"});
  g = small_graph();
  g.params.rotary_dim = 2;
  check_rejected(g, {"arena 3 'const' has 0 bytes, fewer than the RoPE table's 16 (4 positions of 2 bf16)"});
  g = small_graph();
  g.params.n_kv_heads = 0;
  check_rejected(g, {"the graph's 1 q heads are not a whole number of groups of its 0 kv heads"});
  g = small_graph();
  g.params.attn_chunks = 1u << 17;
  check_rejected(g, {"attention chunks 131072", "at most 65536"});
  g = small_graph();
  g.io.logits = kTable;
  check_rejected(g, {"io.logits (view 0 'embed_tokens') is 32 bf16"});
  g = small_graph();
  g.params.norm_kind = 7;
  check_rejected(g, {"unknown norm kind 7"});
  g = small_graph();
  g.params.rms_eps = std::numeric_limits<float>::infinity();
  check_rejected(g, {"rms_eps inf is not a positive number"});
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
  check_rejected(g, {"view 0 'embed_tokens'", "arena 9", "7 arenas"});
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

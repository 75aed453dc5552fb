// Logits that are not all finite end a decode or a teacher-forced run with an error naming the
// step, on every CPU executor.
#include <doctest/doctest.h>

#include <cmath>

#include "tests/nonfinite_models.h"

using namespace spindle;
using namespace spindle::test;

TEST_CASE("logits that are not all finite: decode names the first such step and its position") {
  for (ExecutorKind kind : {ExecutorKind::Sequential, ExecutorKind::SequentialF64, ExecutorKind::Threaded}) {
    CAPTURE(executor_kind_name(kind));
    check_nonfinite_logits_refused({kind, 2});
  }
}

TEST_CASE("teacher forcing stops at the first step whose logits are not all finite") {
  const ModelWeights w = model_with_bad_value(NAN, false);
  const Graph g = short_context_graph(w);
  auto ex = make_executor(g, w, {ExecutorKind::Sequential});
  CHECK_THROWS_WITH_AS(teacher_forced_logits(*ex, g, {1, 2, 3}), doctest::Contains("step 0 (position 0)"), Error);
}

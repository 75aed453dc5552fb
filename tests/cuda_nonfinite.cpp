// Logits that are not all finite end a CUDA decode, in every mode, with the error every
// executor gives. Needs a GPU.
#include <doctest/doctest.h>

#include "tests/cuda_fixture.h"
#include "tests/nonfinite_models.h"

using namespace spindle;

TEST_CASE("cuda: logits that are not all finite are an error naming the step, in every mode") {
  for (CudaMode mode : {CudaMode::Megakernel, CudaMode::PerOp, CudaMode::Graph})
    for (ScheduleKind schedule : {ScheduleKind::Ticket, ScheduleKind::Static}) {
      if (mode != CudaMode::Megakernel && schedule == ScheduleKind::Static) continue;
      CAPTURE(cuda_mode_name(mode));
      CAPTURE(schedule_kind_name(schedule));
      test::check_nonfinite_logits_refused(cuda_options(mode, schedule));
    }
}

// Logits that are not all finite end a Vulkan decode with the error every executor gives.
#include <doctest/doctest.h>

#include "tests/nonfinite_models.h"
#include "tests/vulkan_fixture.h"

TEST_CASE("vulkan: logits that are not all finite are an error naming the step") {
  spindle::test::check_nonfinite_logits_refused(vulkan_options(2));
}

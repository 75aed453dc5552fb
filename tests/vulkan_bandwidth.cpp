// The device copy bandwidth that `spindle bench` takes as the Vulkan executor's ceiling on a
// GPU: a number where a copy can be timed, an error naming the reason where it cannot.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "host/vulkan_devices.h"
#include "tests/executors_fixture.h"

using namespace spindle;

TEST_CASE("vulkan: the chosen device's copy bandwidth is measured, and sizes it cannot copy are refused") {
  const VulkanDeviceInfo d = chosen_vulkan_device(-1);
  CHECK(d.unusable.empty());
  const double gbs = measure_vulkan_copy_bandwidth_gbs(-1, uint64_t(64) << 20);
  MESSAGE(d.name << " (" << d.type << "): " << gbs << " GB/s (read + write)");
  CHECK(std::isfinite(gbs));
  CHECK(gbs > 0);
  CHECK(error_of([] { measure_vulkan_copy_bandwidth_gbs(-1, 15); }) ==
        "vulkan copy bandwidth: the copy must have at least 16 bytes");
  CHECK(std::isfinite(measure_vulkan_copy_bandwidth_gbs(-1, 16 * 1000 + 7)));  // a tail that is not copied
  CHECK(error_of([] { measure_vulkan_copy_bandwidth_gbs(-1, uint64_t(1) << 62); }).find("allocates at once") !=
        std::string::npos);
  CHECK(error_of([] { chosen_vulkan_device(99); }).find("there is no device 99") != std::string::npos);
}

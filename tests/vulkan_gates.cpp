// The HF fixtures (tests/gates_hf_fixtures.cpp) with the Vulkan executor: its teacher-forced
// logits are the sequential reference's bit for bit, so they pass the KL gate against HF's.
#include <doctest/doctest.h>

#include "tests/hf_fixtures.h"
#include "tests/vulkan_fixture.h"

TEST_CASE("vulkan: the HF fixtures pass the KL gate, with the CPU reference's logits bit for bit") {
  std::vector<std::string> names = kHfFixtures;
  names.insert(names.end(), kHfHybridFixtures.begin(), kHfHybridFixtures.end());
  for (const std::string& name : names) {
    CAPTURE(name);
    check_hf_fixture_as_reference(load_hf_fixture(name), vulkan_options(2));
  }
}

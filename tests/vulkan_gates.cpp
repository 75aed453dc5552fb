// The HF fixtures (tests/gates_hf_fixtures.cpp) with the Vulkan executor: its teacher-forced
// logits are the sequential reference's bit for bit, so they pass the KL gate against HF's.
#include <doctest/doctest.h>

#include "tests/hf_fixtures.h"
#include "tests/vulkan_fixture.h"

TEST_CASE("vulkan: the HF qwen3 and qwen3_moe fixtures pass the KL gate, with the CPU reference's logits bit for bit") {
  for (const std::string& name : kHfFixtures) {
    CAPTURE(name);
    check_hf_fixture_as_reference(load_hf_fixture(name), vulkan_options(2));
  }
}

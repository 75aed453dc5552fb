// The HF fixtures (tests/gates_hf_fixtures.cpp) with the CUDA executor in every mode and
// schedule: its teacher-forced logits are the sequential reference's bit for bit, so they pass
// the KL gate against HF's. Needs a GPU.
#include <doctest/doctest.h>

#include "tests/cuda_fixture.h"
#include "tests/hf_fixtures.h"

using namespace spindle;

TEST_CASE("cuda: the HF fixtures pass the KL gate in every mode, with the CPU reference's logits bit for bit") {
  std::vector<std::string> names = kHfFixtures;
  names.insert(names.end(), kHfHybridFixtures.begin(), kHfHybridFixtures.end());
  for (const std::string& name : names) {
    CAPTURE(name);
    const HfFixture f = load_hf_fixture(name);
    check_hf_fixture_as_reference(f, cuda_options(CudaMode::Megakernel, ScheduleKind::Ticket));
    check_hf_fixture_as_reference(f, cuda_options(CudaMode::Megakernel, ScheduleKind::Static));
    check_hf_fixture_as_reference(f, cuda_options(CudaMode::PerOp));
    check_hf_fixture_as_reference(f, cuda_options(CudaMode::Graph));
  }
}

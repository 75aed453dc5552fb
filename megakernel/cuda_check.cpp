#include "megakernel/cuda_check.h"

#include <string>

#include "tasks/error.h"

namespace spindle::cuda {

void cuda_check(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return;
  throw Error(std::string("cuda: ") + call + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

}  // namespace spindle::cuda

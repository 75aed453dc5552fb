// Every CUDA runtime call is checked; a failure becomes a spindle::Error naming the call.
#pragma once
#include <cuda_runtime_api.h>

namespace spindle::cuda {

// Throws spindle::Error("cuda: CALL failed: NAME (description)") unless e is cudaSuccess.
void cuda_check(cudaError_t e, const char* call);

}  // namespace spindle::cuda

#define SP_CUDA(call) ::spindle::cuda::cuda_check((call), #call)

// Owners of CUDA runtime handles (stream, event, instantiated graph), so that an exception
// on any path releases what was created.
#pragma once
#include <cuda_runtime_api.h>

#include <utility>

#include "megakernel/cuda_check.h"

namespace spindle::cuda {

template <class H, cudaError_t (*Destroy)(H)>
class Handle {
 public:
  Handle() = default;
  explicit Handle(H h) : h_(h) {}
  Handle(Handle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Handle& operator=(Handle&& o) noexcept {
    std::swap(h_, o.h_);
    return *this;
  }
  ~Handle() {
    if (h_) Destroy(h_);  // teardown cannot throw; a failed destroy leaves nothing to undo
  }
  H get() const { return h_; }
  explicit operator bool() const { return h_ != nullptr; }

 private:
  H h_ = nullptr;
};

using Stream = Handle<cudaStream_t, cudaStreamDestroy>;
using Event = Handle<cudaEvent_t, cudaEventDestroy>;
using GraphExec = Handle<cudaGraphExec_t, cudaGraphExecDestroy>;
using CapturedGraph = Handle<cudaGraph_t, cudaGraphDestroy>;

inline Stream make_stream() {
  cudaStream_t s = nullptr;
  SP_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return Stream(s);
}

inline Event make_event() {
  cudaEvent_t e = nullptr;
  SP_CUDA(cudaEventCreate(&e));
  return Event(e);
}

}  // namespace spindle::cuda

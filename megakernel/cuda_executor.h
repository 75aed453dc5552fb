// The CUDA executor: the graph's steps on one GPU, as the persistent megakernel (one launch
// runs many steps, blocks take tasks by ticket or static list and wait on counters) or as
// the kernel-per-op and CUDA-graph baselines built from the same device tiles. Every mode
// gives the CPU executors' tokens and logits bit for bit. Greedy sampling only, for now.
#pragma once
#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "host/executor.h"

namespace spindle {

namespace cuda {
struct SharedDevice;
class Runner;
}  // namespace cuda

class CudaExecutor final : public Executor {
 public:
  // Throws spindle::Error when the graph uses something the device tiles do not support, the
  // weights do not match it, or the device runs out of memory (naming the bytes and arena).
  CudaExecutor(const Graph& g, const ModelWeights& w, const ExecutorOptions& opt);
  ~CudaExecutor() override;

  // Uploads the STATE arena, runs, reads STATE and the logits back. Throws spindle::Error
  // when the state asks for temperature > 0, and on a device failure (watchdog, token or
  // position out of range), after which the executor refuses to run again.
  void run_steps(uint32_t steps) override;
  std::string describe() const override;
  std::span<const float> logits() const override;
  void clear_recurrent_state() override;

  // Device time of the last run_steps (cudaEvents around its launches), in milliseconds.
  double last_run_device_ms() const { return last_run_ms_; }
  // Blocks of the persistent kernel (after clamping to what is co-resident); 0 for the modes
  // that launch a kernel a stage.
  uint32_t workers() const;

 private:
  void run_on_device(uint32_t steps);
  void read_back(uint32_t steps);

  ExecutorOptions opt_;
  std::unique_ptr<cuda::SharedDevice> dev_;
  std::unique_ptr<cuda::Runner> runner_;
  std::vector<float> logits_;
  double last_run_ms_ = 0;
  uint64_t trace_epoch_ns_ = 0;  // %globaltimer of the first traced task
  bool broken_ = false;
};

// True when the runtime sees a CUDA device; else `why` (if given) says what it reported.
bool cuda_device_available(std::string* why = nullptr);

std::unique_ptr<Executor> make_cuda_executor(const Graph& g, const ModelWeights& w, const ExecutorOptions& opt);

// Device-to-device copy bandwidth in GB/s (bytes read plus bytes written per second): the
// median of repeated cudaMemcpyAsync copies of `bytes` after a warm-up. Use >= 2 GiB so the
// L2 does not flatter it. The ceiling `spindle bench` reports its fraction against.
double measure_copy_bandwidth_gbs(size_t bytes);

}  // namespace spindle

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
  // Blocks of the persistent kernel (after clamping to what is co-resident).
  uint32_t workers() const { return blocks_; }

 private:
  struct Device;
  void run_on_device(uint32_t steps);
  void prepare_cluster_program(const Graph& g, uint32_t score_positions, uint32_t kv_positions, size_t smem_limit);
  void launch_cluster_program(uint32_t steps, uint32_t score_positions, uint32_t kv_positions);
  void read_back(uint32_t steps);
  size_t trace_records(uint32_t steps) const;
  std::string blocks_report() const;

  ExecutorOptions opt_;
  std::unique_ptr<Device> dev_;
  uint32_t blocks_ = 0;
  size_t mk_smem_ = 0;
  bool two_hop_ = false;        // the graph needs the persistent kernel's two-hop build (megakernel.h)
  uint32_t gang_stage_ = 0;     // tasks of the graph's largest stage holding a gang (0: no gangs)
  bool gangs_at_once_ = false;  // its gangs' members run at once, each in its block (tasks/gang.h)
  bool copy_ahead_ = false;     // some task's weights may be copied during the task before
  size_t preload_smem_ = 0;  // the dynamic shared memory the weight preloads need; 0: no task qualifies
  std::vector<float> logits_;
  double last_run_ms_ = 0;
  uint64_t trace_epoch_ns_ = 0;  // %globaltimer of the first traced task
  bool broken_ = false;
  uint32_t clusters_ = 0;        // the cluster program's clusters of 8 blocks (0: not that program)
  size_t cluster_smem_ = 0;      // its dynamic shared memory a block
  uint32_t ring_slots_ = 0;      // its weight ring's slots
  uint32_t mlp_ring_slots_ = 0;  // an MLP-only block's
  std::vector<uint32_t> cluster_trace_tasks_;  // the graph task of each of a step's trace records
};

// True when the runtime sees a CUDA device; else `why` (if given) says what it reported.
bool cuda_device_available(std::string* why = nullptr);

std::unique_ptr<Executor> make_cuda_executor(const Graph& g, const ModelWeights& w, const ExecutorOptions& opt);

// Device-to-device copy bandwidth in GB/s (bytes read plus bytes written per second): the
// median of repeated cudaMemcpyAsync copies of `bytes` after a warm-up. Use >= 2 GiB so the
// L2 does not flatter it. The ceiling `spindle bench` reports its fraction against.
double measure_copy_bandwidth_gbs(size_t bytes);

}  // namespace spindle

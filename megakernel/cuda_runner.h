// How the CUDA executor runs a graph's steps, one runner a mode: the persistent megakernel
// (persistent_runner.cpp), the cluster program (cluster_runner.cpp), and the kernel-per-op
// baseline and its CUDA graph (stage_runner.cpp). The executor (cuda_executor.cpp) keeps what
// every mode shares (SharedDevice) and, around each run, the step state, the logits and the trace.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "host/executor.h"
#include "megakernel/cuda_handles.h"
#include "megakernel/device_buffer.h"
#include "megakernel/device_model.h"
#include "megakernel/device_records.h"
#include "tasks/graph.h"

namespace spindle::cuda {

// The device memory and stream every mode uses.
struct SharedDevice {
  DeviceModel model;
  // The graph's counters, then, for a graph with gangs, one gang barrier word a task (used at
  // gangs' rank-0 records); zeroed.
  DeviceBuffer counters;
  DeviceBuffer control;  // the run control block, zeroed
  DeviceBuffer trace;    // a traced run's records, grown to the largest run
  Stream stream = make_stream();
  Event start = make_event(), stop = make_event();

  SharedDevice(const Graph& g, const ModelWeights& w, bool gangs);
};

// What a mode's launches need of the device and of attention's tiles.
struct LaunchLimits {
  uint32_t score_positions = 0;  // positions an attention score block holds
  uint32_t kv_positions = 0;     // positions whose K and V rows an attention stage holds
  size_t tile_smem = 0;          // the largest tile's dynamic shared memory
  size_t smem_limit = 0;         // a block's shared memory on this device
  uint32_t sms = 0;
};

// The steps of one run: the first is run step `first_step`, at context position `first_position`.
struct RunSteps {
  uint32_t steps, first_step, first_position;
};

class Runner {
 public:
  virtual ~Runner() = default;
  // Enqueues the run's launches on the shared stream.
  virtual void launch(const RunSteps& run) = 0;
  // The mode and its shape, e.g. "cuda per-op (291 launches per step)"; without the device's name.
  virtual std::string describe() const = 0;
  // Trace records a run of `steps` writes.
  virtual size_t trace_records(uint32_t steps) const = 0;
  // The records as graph tasks, those no block wrote dropped (the cluster program's records are
  // its phases); the other modes' already are.
  virtual void records_as_tasks(std::vector<DeviceTrace>&) const {}
  // Whether a traced run zeroes its records first (a mode that writes only some of them).
  virtual bool writes_some_records() const { return false; }
  // The blocks' progress words (the persistent kernel's), or null.
  virtual uint32_t* progress() const { return nullptr; }
  // After a failure: where the persistent kernel's blocks were; empty for the other modes.
  virtual std::string blocks_report() const { return ""; }
  // Persistent blocks (0: a launch per stage).
  virtual uint32_t workers() const { return 0; }
};

// The runner of opt's mode, its device tables built and uploaded. Throws spindle::Error when the
// graph's tiles do not fit the device, naming the knobs that shrink them.
std::unique_ptr<Runner> make_runner(const Graph& g, const ExecutorOptions& opt, SharedDevice& d);

// Each mode's.
std::unique_ptr<Runner> make_persistent_runner(const Graph& g, const ExecutorOptions& opt, SharedDevice& d,
                                               const LaunchLimits& limits);
std::unique_ptr<Runner> make_cluster_runner(const Graph& g, const ExecutorOptions& opt, SharedDevice& d,
                                            const LaunchLimits& limits);
std::unique_ptr<Runner> make_stage_runner(const Graph& g, const ExecutorOptions& opt, SharedDevice& d,
                                          const LaunchLimits& limits);

// The persistent kernel reads an MLP graph's down weights piece-major (repack_down.h): each
// down view of an MLP task, rewritten in place once. Throws if two tasks cut one view into
// pieces of different widths.
void repack_down_weights(const Graph& g, const DeviceModel& model);

// The device table of g's tasks, for both persistent modes' and the stage kernels' launches:
// `tasks` (the stage kernels') or `staged` (the persistent kernel's), the schedule's tables, and
// the gang barrier words (null: gangs run whole).
struct DeviceTables {
  const SpTask* tasks = nullptr;
  const StagedTask* staged = nullptr;
  const uint32_t* list_begin = nullptr;
  const uint32_t* list_tasks = nullptr;
  const uint32_t* stage_first = nullptr;
  uint32_t n_stages = 0;
  uint32_t* gang_counters = nullptr;
};
DeviceGraph device_graph(const Graph& g, const SharedDevice& d, const LaunchLimits& limits, const DeviceTables& t);

// A device buffer of `bytes` bytes, zeroed.
DeviceBuffer zeroed(size_t bytes, const std::string& what);

// Copies b.bytes() bytes from host memory into b.
void copy_to_device(DeviceBuffer& b, const void* host);
template <class T>
DeviceBuffer upload(const std::vector<T>& host, const std::string& what) {
  DeviceBuffer b(host.size() * sizeof(T), what);
  copy_to_device(b, host.data());
  return b;
}

}  // namespace spindle::cuda

// The cluster program (cluster_program.h, docs/two-hop-layer.md): a graph built for it, run as
// clusters of 8 blocks streaming the weights through a ring.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "megakernel/cluster_kernel.h"
#include "megakernel/cluster_program.h"
#include "megakernel/cuda_check.h"
#include "megakernel/cuda_runner.h"
#include "megakernel/repack_down.h"
#include "megakernel/tile_layout.h"
#include "ops/attention.h"
#include "tasks/error.h"

namespace spindle::cuda {
namespace {

// Fewer slots than this leave too little in flight for the cluster program to stream its weights.
constexpr uint32_t kClusterMinRingSlots = 4;

// The cluster program's score block: a multiple of 16 positions, so that the K/V rows staged
// after it start on a 128-byte boundary (at position 4096, 521 positions
// took 2.8% longer a token than 520; with every buffer on a 128-byte boundary, 528 another 0.6%
// less).
uint32_t cluster_score_positions(uint32_t positions) { return (positions + 15u) & ~15u; }

class ClusterRunner final : public Runner {
 public:
  // Its plan on this device's arenas, its exchange memory, and as many clusters as are
  // co-resident (one a kv head, one an MLP gang at least).
  ClusterRunner(const Graph& g, const ExecutorOptions& opt, SharedDevice& d, const LaunchLimits& limits)
      : g_(g), opt_(opt), d_(d), limits_(limits) {
    const SpGraphParams& p = g.params;
    std::vector<uint8_t*> bases;
    for (uint32_t a = 0; a < g.arenas.size(); ++a) bases.push_back(d.model.arena(a));
    ClusterPlan plan = plan_cluster_program(g, bases);
    const ClusterSmem smem =
        cluster_kernel_smem(p, cluster_score_positions(limits.score_positions), limits.kv_positions, limits.smem_limit);
    if (smem.ring_slots < kClusterMinRingSlots)
      throw Error("cuda executor: the cluster program's weight ring needs " + std::to_string(kClusterMinRingSlots) +
                  " slots of " + std::to_string(kRingChunkBytes >> 10) + " KiB; " + std::to_string(smem.ring_slots) +
                  " fit beside attention's shared memory in a block's " + std::to_string(limits.smem_limit) +
                  " bytes; lower --tune cuda-attn-kv-kb or cuda-attn-score-kb");
    smem_ = smem.bytes;
    ring_slots_ = smem.ring_slots;
    mlp_ring_slots_ = smem.mlp_ring_slots;
    const uint32_t needed = std::max(p.n_kv_heads, plan.program.mlp_gangs);  // a kv head, an MLP gang a cluster
    const uint32_t clusters = cluster_kernel_max_clusters(smem_);
    const uint32_t wanted = opt.workers ? opt.workers / kClusterRanks : clusters;
    if (std::min(wanted, clusters) < needed)
      throw Error("cuda executor: the cluster program needs " + std::to_string(needed) + " clusters of " +
                  std::to_string(kClusterRanks) + " blocks (one a kv head, one an MLP gang); " +
                  std::to_string(std::min(wanted, clusters)) + " " +
                  (wanted < clusters ? "asked for (--workers / 8)" : "fit on this device"));
    clusters_ = std::min(wanted, clusters);
    const size_t H = p.hidden;
    // o_proj piece-major, as the program streams it (cluster_program.h); nothing else reads it.
    for (const ClusterLayer& layer : plan.layers)
      repack_piece_major(const_cast<bf16*>(layer.wo), uint32_t(H), p.n_heads * p.head_dim, plan.o_stride,
                         p.n_heads / p.n_kv_heads * p.head_dim);
    layers_ = upload(plan.layers, "the cluster program's layers");
    // Zeroed: flag 0 is no layer's.
    o_words_ = zeroed(2 * p.n_kv_heads * H * 8, "the cluster program's o_proj words");
    mlp_words_ = zeroed(2 * plan.program.mlp_gangs * H * 8, "the cluster program's MLP words");
    argmax_words_ = zeroed(size_t(workers()) * kArgmaxStride * 8, "the cluster program's argmax partials");
    program_ = plan.program;
    program_.layers = layers_.as<const ClusterLayer>();
    program_.o_words = o_words_.as<unsigned long long>();
    program_.mlp_words = mlp_words_.as<unsigned long long>();
    program_.argmax_words = argmax_words_.as<unsigned long long>();
    program_.control = d.control.as<RunControl>();
    trace_tasks_ = cluster_trace_tasks(g, clusters_);
  }

  // The run's launches, steps_per_launch steps each; the exchange words' flags go on from
  // launch to launch (zeroed again before they would wrap).
  void launch(const RunSteps& run) override {
    const uint32_t L = g_.params.n_layers;
    const uint32_t per_launch = opt_.steps_per_launch ? opt_.steps_per_launch : run.steps;
    for (uint32_t done = 0; done < run.steps; done += per_launch) {
      ClusterLaunch launch{};
      launch.steps = std::min(per_launch, run.steps - done);
      if (uint64_t(flag_) + uint64_t(launch.steps) * L + 1 > UINT32_MAX) {
        for (DeviceBuffer* b : {&o_words_, &mlp_words_, &argmax_words_})
          SP_CUDA(cudaMemsetAsync(b->data(), 0, b->bytes(), d_.stream.get()));
        flag_ = 0;
      }
      launch.first_step = run.first_step + done;
      launch.first_position = run.first_position + done;
      launch.flag_base = flag_;
      launch.clusters = clusters_;
      launch.watchdog_ns = uint64_t(opt_.watchdog_ms) * 1000000u;
      // Attention's area sized for the launch's longest chunk, not the graph's: where the launch's
      // positions are short, the front blocks' rings take the rest (qwen3-0.6b: 11 slots where 8,
      // -2.6% a token at position 1). Its bytes never exceed the graph's.
      const uint32_t longest = chunk_size(launch.first_position + launch.steps, g_.params.attn_chunks);
      launch.score_positions = cluster_score_positions(std::min(limits_.score_positions, longest));
      launch.kv_positions = std::min(limits_.kv_positions, longest);
      const ClusterSmem ring = cluster_ring_slots(g_.params, launch.score_positions, launch.kv_positions, smem_);
      launch.ring_slots = ring.ring_slots;
      launch.mlp_ring_slots = ring.mlp_ring_slots;
      launch_cluster_kernel(program_, launch, smem_, d_.stream.get());
      flag_ += launch.steps * L;
    }
  }

  std::string describe() const override {
    // The front blocks' rings at the graph's context, and in a launch whose positions are all short.
    const uint32_t short_slots = cluster_ring_slots(g_.params, cluster_score_positions(1), 1, smem_).ring_slots;
    std::string slots = std::to_string(ring_slots_);
    if (short_slots > ring_slots_) slots.append("-").append(std::to_string(short_slots));
    return "cuda megakernel, cluster program (" + std::to_string(clusters_) + " clusters of " +
           std::to_string(kClusterRanks) + " blocks x 256 threads, weight ring of " + slots + " x " +
           std::to_string(kRingChunkBytes >> 10) + " KiB, an MLP-only block's " + std::to_string(mlp_ring_slots_) +
           ")";
  }

  // A run's trace records: its blocks' phases (cluster_program.h).
  size_t trace_records(uint32_t steps) const override { return size_t(steps) * trace_tasks_.size(); }
  bool writes_some_records() const override { return true; }
  // A phase's record stands for its graph task; the records no block wrote are zeros.
  void records_as_tasks(std::vector<DeviceTrace>& records) const override {
    const size_t per_step = trace_tasks_.size();
    for (size_t i = 0; i < records.size(); ++i) records[i].task = trace_tasks_[i % per_step];
    std::erase_if(records, [](const DeviceTrace& r) { return r.end_ns == 0 || r.task == SP_NO_TASK; });
  }
  uint32_t workers() const override { return clusters_ * kClusterRanks; }

 private:
  const Graph& g_;
  const ExecutorOptions opt_;
  SharedDevice& d_;
  const LaunchLimits limits_;
  uint32_t clusters_ = 0;        // clusters of 8 blocks
  size_t smem_ = 0;              // dynamic shared memory a block
  uint32_t ring_slots_ = 0;      // the weight ring's slots
  uint32_t mlp_ring_slots_ = 0;  // an MLP-only block's
  std::vector<uint32_t> trace_tasks_;  // the graph task of each of a step's trace records
  DeviceBuffer layers_, o_words_, mlp_words_, argmax_words_;  // its layers and exchange words
  ClusterProgram program_{};
  uint32_t flag_ = 0;  // the exchange words' flags used so far
};

}  // namespace

std::unique_ptr<Runner> make_cluster_runner(const Graph& g, const ExecutorOptions& opt, SharedDevice& d,
                                            const LaunchLimits& limits) {
  return std::make_unique<ClusterRunner>(g, opt, d, limits);
}

}  // namespace spindle::cuda

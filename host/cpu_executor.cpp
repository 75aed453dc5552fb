#include <cstring>

#include "host/cpu_executors.h"
#include "ops/qk_norm_rope.h"
#include "tasks/error.h"
#include "tasks/weight_shard.h"

namespace spindle {

CpuExecutor::CpuExecutor(const Graph& g, const ModelWeights& w, bool shard_weights) : Executor(g) {
  if (g.arenas.size() != SP_ARENA_WEIGHTS0 + w.arenas.size())
    throw Error("the graph expects " + std::to_string(g.arenas.size() - SP_ARENA_WEIGHTS0) +
                " weight arenas but the model has " + std::to_string(w.arenas.size()));
  if (!w.in_host_memory())
    throw Error("cpu executor: the weights of " + w.source +
                " are not in host memory (loaded with fill_host = false, for an executor that generates "
                "them on its device); load them filled to run on the CPU");
  // Arenas every device shares: CONST, SYMMETRIC and the weights; the others are each device's
  // (device 0's STATE the host's, Executor::state_arena_).
  const auto own = [this](uint64_t bytes) {
    owned_.emplace_back(bytes, uint8_t(0));
    return owned_.back().data();
  };
  std::vector<uint8_t*> shared(g.arenas.size(), nullptr);
  shared[SP_ARENA_CONST] = own(g.arenas[SP_ARENA_CONST].bytes);
  shared[SP_ARENA_SYMMETRIC] = own(g.arenas[SP_ARENA_SYMMETRIC].bytes);
  for (size_t i = 0; i < w.arenas.size(); ++i) {
    if (g.arenas[SP_ARENA_WEIGHTS0 + i].bytes != w.arenas[i].bytes)
      throw Error("weight arena '" + w.arenas[i].name + "' has " + std::to_string(w.arenas[i].bytes) +
                  " bytes but the graph was built for " + std::to_string(g.arenas[SP_ARENA_WEIGHTS0 + i].bytes));
    // No op writes a weight operand, so binding read-only memory is safe.
    shared[SP_ARENA_WEIGHTS0 + i] = const_cast<uint8_t*>(w.arenas[i].data);
  }
  for (uint32_t d = 0; d < g.devices; ++d) {
    std::vector<uint8_t*> base = shared;
    if (shard_weights) {
      const WeightShard shard = device_weight_shard(g, d);
      for (size_t i = 0; i < w.arenas.size(); ++i) {
        uint8_t* copy = own(w.arenas[i].bytes);
        std::memset(copy, 0xFF, w.arenas[i].bytes);
        for (const ByteRange& r : shard.arenas[i]) std::memcpy(copy + r.begin, w.arenas[i].data + r.begin, r.end - r.begin);
        base[SP_ARENA_WEIGHTS0 + i] = copy;
      }
    }
    base[SP_ARENA_STATE] = d == 0 ? state_arena_.data() : own(g.arenas[SP_ARENA_STATE].bytes);
    for (uint32_t a : {SP_ARENA_WORK, SP_ARENA_KV, SP_ARENA_RECURRENT}) base[a] = own(g.arenas[a].bytes);
    arena_base_.push_back(std::move(base));
  }
  const SpGraphParams& p = g.params;
  fill_rope_table(p.rope_theta, p.rotary_dim, p.context, reinterpret_cast<bf16*>(shared[SP_ARENA_CONST]));
}

TileContext CpuExecutor::tile_context(uint32_t device) {
  std::vector<uint8_t*>& base = arena_base_[device];
  return TileContext{&graph_.params, graph_.views.data(), base.data(),
                     reinterpret_cast<SpStepState*>(base[SP_ARENA_STATE]), graph_.op_params.data()};
}

void CpuExecutor::share_step_state() {
  const uint64_t bytes = graph_.arenas[SP_ARENA_STATE].bytes;
  for (uint32_t d = 1; d < graph_.devices; ++d) std::memcpy(arena_base_[d][SP_ARENA_STATE], state_arena_.data(), bytes);
}

void CpuExecutor::check_devices_agree() const {
  const uint64_t bytes = graph_.arenas[SP_ARENA_STATE].bytes;
  for (uint32_t d = 1; d < graph_.devices; ++d)
    if (std::memcmp(arena_base_[d][SP_ARENA_STATE], state_arena_.data(), bytes) != 0)
      throw Error("device " + std::to_string(d) + "'s step state (its tokens, position or flags) differs from device 0's "
                  "after the run: the devices of the graph disagree");
}

void CpuExecutor::clear_recurrent_state() {
  for (uint32_t d = 0; d < graph_.devices; ++d)
    std::memset(arena_base_[d][SP_ARENA_RECURRENT], 0, graph_.arenas[SP_ARENA_RECURRENT].bytes);
}

std::span<const float> CpuExecutor::logits() const {
  const SpView& v = graph_.views[graph_.io.logits];
  return {reinterpret_cast<const float*>(arena_base_[0][v.arena] + sp_view_offset(v)), size_t(v.cols)};
}

}  // namespace spindle

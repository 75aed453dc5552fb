#include "host/cpu_executors.h"
#include "ops/qk_norm_rope.h"
#include "tasks/error.h"

namespace spindle {

CpuExecutor::CpuExecutor(const Graph& g, const ModelWeights& w) : Executor(g) {
  if (g.arenas.size() != SP_ARENA_WEIGHTS0 + w.arenas.size())
    throw Error("the graph expects " + std::to_string(g.arenas.size() - SP_ARENA_WEIGHTS0) +
                " weight arenas but the model has " + std::to_string(w.arenas.size()));
  if (!w.in_host_memory())
    throw Error("cpu executor: the weights of " + w.source +
                " are not in host memory (loaded with fill_host = false, for an executor that generates "
                "them on its device); load them filled to run on the CPU");
  arena_base_.push_back(state_arena_.data());
  for (uint32_t a = SP_ARENA_WORK; a < SP_ARENA_WEIGHTS0; ++a) {
    owned_.emplace_back(g.arenas[a].bytes, uint8_t(0));
    arena_base_.push_back(owned_.back().data());
  }
  for (size_t i = 0; i < w.arenas.size(); ++i) {
    if (g.arenas[SP_ARENA_WEIGHTS0 + i].bytes != w.arenas[i].bytes)
      throw Error("weight arena '" + w.arenas[i].name + "' has " + std::to_string(w.arenas[i].bytes) +
                  " bytes but the graph was built for " + std::to_string(g.arenas[SP_ARENA_WEIGHTS0 + i].bytes));
    // No op writes a weight operand, so binding read-only memory is safe.
    arena_base_.push_back(const_cast<uint8_t*>(w.arenas[i].data));
  }
  const SpGraphParams& p = g.params;
  fill_rope_table(p.rope_theta, p.rotary_dim, p.context, reinterpret_cast<bf16*>(arena_base_[SP_ARENA_CONST]));
}

TileContext CpuExecutor::tile_context() {
  return TileContext{&graph_.params, graph_.views.data(), arena_base_.data(), &state(), graph_.op_params.data()};
}

void CpuExecutor::clear_recurrent_state() {
  std::vector<uint8_t>& recurrent = owned_[SP_ARENA_RECURRENT - SP_ARENA_WORK];
  std::fill(recurrent.begin(), recurrent.end(), uint8_t(0));
}

std::span<const float> CpuExecutor::logits() const {
  const SpView& v = graph_.views[graph_.io.logits];
  return {reinterpret_cast<const float*>(arena_base_[v.arena] + sp_view_offset(v)), size_t(v.cols)};
}

}  // namespace spindle

#include "megakernel/device_model.h"

#include <cuda_runtime_api.h>

#include <string>

#include "host/synthetic.h"
#include "megakernel/cuda_check.h"
#include "ops/qk_norm_rope.h"
#include "tasks/error.h"

namespace spindle::cuda {
namespace {

template <class T>
DeviceBuffer upload(const T* host, size_t count, const std::string& what) {
  DeviceBuffer b(count * sizeof(T), what);
  SP_CUDA(cudaMemcpy(b.data(), host, b.bytes(), cudaMemcpyHostToDevice));
  return b;
}

}  // namespace

DeviceModel::DeviceModel(const Graph& g, const ModelWeights& w) {
  if (g.arenas.size() != SP_ARENA_WEIGHTS0 + w.arenas.size())
    throw Error("the graph expects " + std::to_string(g.arenas.size() - SP_ARENA_WEIGHTS0) +
                " weight arenas but the model has " + std::to_string(w.arenas.size()));
  const bool synthetic = w.source.starts_with(kSyntheticPrefix);
  SyntheticPlan plan;
  if (synthetic) plan = synthetic_plan_of(w);  // checks that w is laid out as the plan says
  for (uint32_t a = 0; a < g.arenas.size(); ++a) {
    const ArenaInfo& info = g.arenas[a];
    arenas_.emplace_back(info.bytes, "arena '" + info.name + "'");
    if (a < SP_ARENA_WEIGHTS0) continue;
    const HostArena& host = w.arenas[a - SP_ARENA_WEIGHTS0];
    if (host.bytes != info.bytes)
      throw Error("weight arena '" + host.name + "' has " + std::to_string(host.bytes) +
                  " bytes but the graph was built for " + std::to_string(info.bytes));
    if (synthetic) {
      generate_synthetic(plan, arenas_[a].data());
      continue;
    }
    if (!host.data && host.bytes) throw Error("cuda executor: weight arena '" + host.name + "' is not in host memory");
    SP_CUDA(cudaMemcpy(arenas_[a].data(), host.data, host.bytes, cudaMemcpyHostToDevice));
  }
  SP_CUDA(cudaMemset(arena(SP_ARENA_WORK), 0, arenas_[SP_ARENA_WORK].bytes()));
  SP_CUDA(cudaMemset(arena(SP_ARENA_KV), 0, arenas_[SP_ARENA_KV].bytes()));

  const SpGraphParams& p = g.params;
  std::vector<bf16> rope(arenas_[SP_ARENA_CONST].bytes() / sizeof(bf16));
  fill_rope_table(p.rope_theta, p.rotary_dim, p.context, rope.data());
  SP_CUDA(cudaMemcpy(arena(SP_ARENA_CONST), rope.data(), rope.size() * sizeof(bf16), cudaMemcpyHostToDevice));

  std::vector<uint8_t*> bases;
  for (const DeviceBuffer& b : arenas_) bases.push_back(b.data());
  params_ = upload(&g.params, 1, "the graph params");
  views_ = upload(g.views.data(), g.views.size(), "the view table");
  bases_ = upload(bases.data(), bases.size(), "the arena table");
  op_params_ = upload(g.op_params.data(), g.op_params.size(), "the op parameter records");
}

TileContext DeviceModel::context() const {
  return TileContext{params_.as<const SpGraphParams>(), views_.as<const SpView>(), bases_.as<uint8_t* const>(),
                     arenas_[SP_ARENA_STATE].as<SpStepState>(), op_params_.as<const SpOpParams>()};
}

}  // namespace spindle::cuda

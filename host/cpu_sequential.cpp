#include "host/cpu_executors.h"
#include "ops/run_task.h"

namespace spindle {

template <class Acc>
void SequentialExecutor<Acc>::run_steps(uint32_t steps) {
  const TileContext ctx = tile_context();
  for (uint32_t s = 0; s < steps; ++s, ++steps_done_)
    for (uint32_t i = 0; i < graph_.tasks.size(); ++i) {
      const uint64_t t0 = tracing_ ? trace_ns() : 0;
      run_task<Acc>(graph_.tasks[i], ctx);
      if (tracing_) trace_.push_back({steps_done_, i, 0, t0, trace_ns(), 0});
    }
}

template <class Acc>
std::string SequentialExecutor<Acc>::describe() const {
  return sizeof(Acc) == 8 ? "sequential (fp64)" : "sequential (fp32)";
}

template class SequentialExecutor<float>;
template class SequentialExecutor<double>;

}  // namespace spindle

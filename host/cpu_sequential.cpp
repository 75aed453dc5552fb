#include "host/cpu_executors.h"
#include "ops/run_task.h"

namespace spindle {

template <class Acc>
void SequentialExecutor<Acc>::run_steps(uint32_t steps) {
  std::vector<TileContext> ctx;
  for (uint32_t d = 0; d < graph_.devices; ++d) ctx.push_back(tile_context(d));
  share_step_state();
  // The graph's order runs every task after those it waits for, whichever device they ran on.
  for (uint32_t s = 0; s < steps; ++s, ++steps_done_)
    for (uint32_t i = 0; i < graph_.tasks.size(); ++i)
      for (uint32_t d = 0; d < graph_.devices; ++d) {
        if (!graph_.runs_on(i, d)) continue;
        const uint64_t t0 = tracing_ ? trace_ns() : 0;
        run_task<Acc>(graph_.tasks[i], ctx[d]);
        if (tracing_) trace_.push_back({steps_done_, i, d, t0, trace_ns(), 0, TaskTrace::kNoSm, d});
      }
  check_devices_agree();
}

template <class Acc>
std::string SequentialExecutor<Acc>::describe() const {
  return sizeof(Acc) == 8 ? "sequential (fp64)" : "sequential (fp32)";
}

template class SequentialExecutor<float>;
template class SequentialExecutor<double>;

}  // namespace spindle

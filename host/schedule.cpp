#include "host/schedule.h"

namespace spindle {

std::vector<std::vector<uint32_t>> static_lists(const Graph& g, uint32_t workers) {
  std::vector<std::vector<uint32_t>> lists(workers);
  for (uint32_t i = 0; i < g.tasks.size(); ++i) lists[i % workers].push_back(i);
  return lists;
}

}  // namespace spindle

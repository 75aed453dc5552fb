#include "host/schedule.h"

namespace spindle {

std::vector<std::vector<uint32_t>> static_lists(const std::vector<uint32_t>& tasks, uint32_t workers) {
  std::vector<std::vector<uint32_t>> lists(workers);
  for (size_t k = 0; k < tasks.size(); ++k) lists[k % workers].push_back(tasks[k]);
  return lists;
}

std::vector<uint32_t> device_tasks(const Graph& g, uint32_t device) {
  std::vector<uint32_t> tasks;
  for (uint32_t i = 0; i < g.tasks.size(); ++i)
    if (g.runs_on(i, device)) tasks.push_back(i);
  return tasks;
}

}  // namespace spindle

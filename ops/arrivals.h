// The last-arrival count that lets the last of a step's tiles of a group combine their
// partials in a fixed order, whoever it is (attention's merge, the MLP gangs' sum).
#pragma once
#include <stdint.h>

#include <atomic>

namespace spindle {

// Counts `done` finished tiles of a group whose `tiles` tiles run once a step: true for the
// step's last, which resets the count for the next step. The acquire-release add orders every
// earlier tile's partials before the last one's reads; the next step's tiles come after the
// reset through the graph's counters.
inline bool arrive_last(uint32_t& arrivals, uint32_t tiles, uint32_t done = 1) {
  std::atomic_ref<uint32_t> count(arrivals);
  if (count.fetch_add(done, std::memory_order_acq_rel) + done != tiles) return false;
  count.store(0, std::memory_order_relaxed);
  return true;
}

}  // namespace spindle

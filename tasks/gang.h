// Gangs (docs/isa.md, "Gangs"): w consecutive records of one stage, ranks 0..w-1, whose op
// runs in phases with a barrier among the members between each two. An executor runs the
// members at once (the CUDA persistent kernel, when every member can have its own block) or
// the gang whole: rank 0's worker runs phase by phase, rank by rank, and the other ranks'
// records only wait and signal. The math depends only on the ranks, so both give the same bits.
#pragma once
#include <stdint.h>

#include "tasks/host_device.h"
#include "tasks/task.h"

// Members of the record's gang; 1 for a record that is in none.
SP_HD inline uint32_t sp_gang_width(const SpTask& t) { return t.gang_width > 1 ? t.gang_width : 1u; }

// Phases of an opcode's task, a gang barrier between each two; 1 for an op that cannot gang.
SP_HD inline uint32_t sp_gang_phases(uint32_t op) { return op == SP_OP_MLP || op == SP_OP_GDN ? 2u : 1u; }

// Member r's share [sp_gang_share(n, w, r), sp_gang_share(n, w, r + 1)) of n items split over
// w members: ceil(n / w) each, the last ones shorter or empty.
SP_HD inline uint32_t sp_gang_share(uint32_t n, uint32_t w, uint32_t r) {
  const uint32_t each = (n + w - 1) / w, at = r * each;
  return at < n ? at : n;
}

#include "tasks/weight_shard.h"

#include "tasks/op_decls.h"

namespace spindle {

uint64_t WeightShard::bytes() const {
  uint64_t total = 0;
  for (const std::vector<ByteRange>& ranges : arenas) total += range_bytes(ranges);
  return total;
}

WeightShard device_weight_shard(const Graph& g, uint32_t device) {
  WeightShard shard;
  shard.arenas.resize(g.arenas.size() > SP_ARENA_WEIGHTS0 ? g.arenas.size() - SP_ARENA_WEIGHTS0 : 0);
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    if (!g.runs_on(i, device)) continue;
    const SpTask& t = g.tasks[i];
    const OpDecl* decl = op_decl(t.op);
    uint32_t by_rows = 0;  // operands whose rows the op named
    const auto rows = [&](uint32_t k, uint64_t row0, uint64_t row1) {
      const SpView& v = g.views[t.operand[k]];
      if (v.arena < SP_ARENA_WEIGHTS0) return;
      by_rows |= 1u << k;
      add_view_rows(v, row0, row1, shard.arenas[v.arena - SP_ARENA_WEIGHTS0]);
    };
    if (decl && decl->weight_rows) decl->weight_rows(g, t, rows);
    for_each_view_operand(t, [&](uint32_t k, uint32_t id) {
      const SpView& v = g.views[id];
      if (v.arena >= SP_ARENA_WEIGHTS0 && !(by_rows >> k & 1u))
        add_view_rows(v, 0, v.rows, shard.arenas[v.arena - SP_ARENA_WEIGHTS0]);
    });
  }
  for (std::vector<ByteRange>& ranges : shard.arenas) merge_ranges(ranges);
  return shard;
}

}  // namespace spindle

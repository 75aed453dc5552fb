#include "tasks/weight_shard.h"

#include <algorithm>

#include "tasks/op_decls.h"

namespace spindle {

uint64_t WeightShard::bytes() const {
  uint64_t total = 0;
  for (const std::vector<ByteRange>& ranges : arenas)
    for (const ByteRange& r : ranges) total += r.end - r.begin;
  return total;
}

namespace {

// Rows [row0, row1) of view v as byte ranges of its arena: one range where its rows are
// whole, one a row where they are some of a wider matrix's columns.
void add_rows(const SpView& v, uint64_t row0, uint64_t row1, std::vector<ByteRange>& out) {
  const uint64_t e = sp_dtype_bytes(v.dtype), at = sp_view_offset(v), stride = uint64_t(v.row_stride) * e;
  row1 = std::min<uint64_t>(row1, v.rows);
  if (row0 >= row1) return;
  if (v.cols == v.row_stride || row1 - row0 == 1) {
    out.push_back({at + row0 * stride, at + (row1 - 1) * stride + uint64_t(v.cols) * e});
    return;
  }
  for (uint64_t r = row0; r < row1; ++r) out.push_back({at + r * stride, at + r * stride + uint64_t(v.cols) * e});
}

// Sorted, touching or overlapping ranges joined.
void merge(std::vector<ByteRange>& ranges) {
  std::sort(ranges.begin(), ranges.end(), [](ByteRange a, ByteRange b) { return a.begin < b.begin; });
  size_t n = 0;
  for (const ByteRange& r : ranges) {
    if (n && r.begin <= ranges[n - 1].end) ranges[n - 1].end = std::max(ranges[n - 1].end, r.end);
    else ranges[n++] = r;
  }
  ranges.resize(n);
}

}  // namespace

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
      add_rows(v, row0, row1, shard.arenas[v.arena - SP_ARENA_WEIGHTS0]);
    };
    if (decl && decl->weight_rows) decl->weight_rows(g, t, rows);
    for_each_view_operand(t, [&](uint32_t k, uint32_t id) {
      const SpView& v = g.views[id];
      if (v.arena >= SP_ARENA_WEIGHTS0 && !(by_rows >> k & 1u))
        add_rows(v, 0, v.rows, shard.arenas[v.arena - SP_ARENA_WEIGHTS0]);
    });
  }
  for (std::vector<ByteRange>& ranges : shard.arenas) merge(ranges);
  return shard;
}

}  // namespace spindle

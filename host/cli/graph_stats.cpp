#include "host/cli/graph_stats.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "tasks/op_decls.h"

namespace spindle::cli {
namespace {

using Interval = std::pair<uint64_t, uint64_t>;  // [begin, end) bytes in an arena

void add_view_bytes(const SpView& v, std::vector<Interval>& out) {
  const uint64_t b = sp_dtype_bytes(v.dtype), off = sp_view_offset(v);
  if (v.rows == 0 || v.cols == 0) return;
  if (v.rows == 1 || v.row_stride == v.cols) {
    out.emplace_back(off, off + uint64_t(v.rows) * v.cols * b);
    return;
  }
  for (uint64_t r = 0; r < v.rows; ++r)
    out.emplace_back(off + r * v.row_stride * b, off + (r * v.row_stride + v.cols) * b);
}

uint64_t union_bytes(std::vector<Interval> iv) {
  std::sort(iv.begin(), iv.end());
  uint64_t total = 0, covered_to = 0;
  for (const auto& [b, e] : iv) {
    const uint64_t from = std::max(b, covered_to);
    if (e > from) total += e - from;
    covered_to = std::max(covered_to, e);
  }
  return total;
}

// Calls f(task, operand info, view id) for every view operand.
template <class F>
void for_each_view_operand(const Graph& g, F&& f) {
  for (const SpTask& t : g.tasks) {
    const OpcodeOperands ops = opcode_operands(t.op);
    spindle::for_each_view_operand(t, [&](uint32_t k, uint32_t v) { f(t, ops.operand[k], v); });
  }
}

}  // namespace

uint64_t weight_bytes_per_token(const Graph& g) {
  std::map<uint32_t, std::vector<Interval>> read;  // by arena
  std::set<uint32_t> seen, embed_tables;
  for_each_view_operand(g, [&](const SpTask& t, const OperandInfo& info, uint32_t v) {
    const SpView& view = g.views[v];
    if (view.arena < SP_ARENA_WEIGHTS0 || info.routed) return;  // routed: counted below
    if (t.op == SP_OP_EMBED && info.name == std::string_view("table")) embed_tables.insert(v);
    else if (seen.insert(v).second) add_view_bytes(view, read[view.arena]);
  });
  uint64_t total = 0;
  for (auto& [arena, intervals] : read) total += union_bytes(std::move(intervals));
  for (uint32_t v : embed_tables)
    total += uint64_t(g.views[v].cols) * sp_dtype_bytes(g.views[v].dtype);
  return total + routed_weight_bytes_per_token(g);
}

uint64_t routed_weight_bytes_per_token(const Graph& g) {
  uint64_t total = 0;
  for (const SpTask& t : g.tasks)
    if (const OpDecl* d = op_decl(t.op); d && d->routed_weight_bytes) total += d->routed_weight_bytes(g, t);
  return total;
}

uint64_t recurrent_state_bytes(const Graph& g) {
  std::vector<Interval> state;
  std::set<uint32_t> seen;
  for_each_view_operand(g, [&](const SpTask&, const OperandInfo&, uint32_t v) {
    if (g.views[v].arena == SP_ARENA_RECURRENT && seen.insert(v).second) add_view_bytes(g.views[v], state);
  });
  return union_bytes(std::move(state));
}

double step_bytes(const Graph& g, double kv_rows) {
  return double(weight_bytes_per_token(g)) + double(kv_bytes_per_position(g)) * kv_rows +
         2.0 * double(recurrent_state_bytes(g));
}

uint64_t kv_bytes_per_position(const Graph& g) {
  std::set<uint32_t> caches;
  for_each_view_operand(g, [&](const SpTask&, const OperandInfo& info, uint32_t v) {
    const std::string_view name = info.name;
    if (name == "kv_cache") caches.insert(v);
  });
  uint64_t bytes = 0;
  for (uint32_t v : caches)
    bytes += uint64_t(g.views[v].rows) * g.views[v].cols * sp_dtype_bytes(g.views[v].dtype);
  return g.params.context ? bytes / g.params.context : 0;
}

}  // namespace spindle::cli

#include "host/cli/graph_stats.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "ops/attention.h"
#include "tasks/byte_ranges.h"
#include "tasks/gdn_shape.h"
#include "tasks/op_decls.h"
#include "tasks/operand_check.h"

namespace spindle::cli {
namespace {

// A view's bytes appended as ranges of its arena.
void add_view_bytes(const SpView& v, std::vector<ByteRange>& out) { add_view_rows(v, 0, v.rows, out); }

uint64_t union_bytes(std::vector<ByteRange> ranges) {
  merge_ranges(ranges);
  return range_bytes(ranges);
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
  std::map<uint32_t, std::vector<ByteRange>> read;  // by arena
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
  std::vector<ByteRange> state;
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

namespace {

uint64_t row_bytes(const SpView& v) { return uint64_t(v.cols) * sp_dtype_bytes(v.dtype); }
uint64_t whole_bytes(const SpView& v) { return view_elements(v) * sp_dtype_bytes(v.dtype); }

// ATTENTION's tiles (unit * chunks + chunk): each reads its kv head's K and V rows of its chunk's
// positions before `position`; the first q-head split's tile whose chunk holds the position
// appends the K and V rows there.
TaskBytes attention_bytes(const Graph& g, const SpTask& t, uint32_t position) {
  const SpGraphParams& p = g.params;
  const uint64_t kv_row = row_bytes(g.views[t.operand[3]]);
  TaskBytes b{whole_bytes(g.views[t.operand[1]]) + whole_bytes(g.views[t.operand[2]]), 0};
  for (uint32_t tile = t.tile_begin; tile < t.tile_end; ++tile) {
    const uint32_t unit = tile / p.attn_chunks;
    const PositionRange r = chunk_positions(position + 1, p.attn_chunks, tile % p.attn_chunks);
    const bool holds_position = r.begin < r.end && r.end == position + 1;
    b.read += 2 * kv_row * (r.end - r.begin - (holds_position ? 1 : 0));
    if (holds_position && attn_unit_appends(unit, p.attn_q_splits, p.attn_kv_share)) b.written += 2 * kv_row;
  }
  return b;
}

// GDN: every record reads and writes its state rows; a record that runs whole heads, or its
// gang's rank 0, also reads each head's conv windows (the head's v channels and its key head's q
// and k channels: their weights and rings), gate and norm weights, and writes the newest input of
// its v channels' rings, and of the q and k channels' when it is its key head's first.
TaskBytes gdn_bytes(const Graph& g, const SpTask& t) {
  const GdnShape s = gdn_shape(t, g.views.data());
  const uint64_t state_rows = uint64_t(t.tile_end - t.tile_begin) * row_bytes(g.views[t.operand[6]]);
  TaskBytes b{state_rows, state_rows};
  if (s.width > 1 && t.gang_rank != 0) return b;
  const uint64_t conv_w = row_bytes(g.views[t.operand[1]]), ring = row_bytes(g.views[t.operand[5]]),
                 input = sp_dtype_bytes(g.views[t.operand[5]].dtype), group = s.Hv / s.Hk;
  for (uint32_t h = s.head; h < s.head + s.heads; ++h) {
    b.read += (2 * s.dk + s.dv) * (conv_w + ring) + sp_dtype_bytes(g.views[t.operand[2]].dtype) +
              sp_dtype_bytes(g.views[t.operand[3]].dtype) + whole_bytes(g.views[t.operand[4]]);
    b.written += (s.dv + (h % group == 0 ? 2 * s.dk : 0)) * input;
  }
  return b;
}

}  // namespace

TaskBytes task_bytes(const Graph& g, const SpTask& t, uint32_t position) {
  auto view = [&](uint32_t k) -> const SpView& { return g.views[t.operand[k]]; };
  auto vector = [&](uint32_t k) { return t.operand[k] == SP_NO_VIEW ? 0 : whole_bytes(view(k)); };
  const uint64_t tiles = t.tile_end - t.tile_begin;
  const OpDecl* decl = op_decl(t.op);
  const uint64_t routed = decl && decl->routed_weight_bytes ? decl->routed_weight_bytes(g, t) : 0;
  switch (t.op) {
    case SP_OP_EMBED: return {tiles * sp_dtype_bytes(view(0).dtype), 0};  // the token's row, its columns
    case SP_OP_GEMV: return {tiles * row_bytes(view(0)) + vector(2), 0};
    case SP_OP_GEMV_PIECE:
    case SP_OP_PIECE_DOTS: return {tiles * row_bytes(view(0)), 0};
    case SP_OP_GATE_UP: return {tiles * (row_bytes(view(0)) + row_bytes(view(1))) + vector(3), 0};
    case SP_OP_ROUTER: return {tiles * row_bytes(view(0)) + vector(2), 0};
    case SP_OP_MLP:  // its gate and up rows, down's columns of them, the norm
      return {tiles * (row_bytes(view(0)) + row_bytes(view(1)) + view(2).rows * sp_dtype_bytes(view(2).dtype)) +
                  vector(4),
              0};
    case SP_OP_EXPERT_GATE_UP: return {routed + vector(2), 0};
    case SP_OP_EXPERT_DOWN:
    case SP_OP_EXPERT_DOWN_PIECE: return {routed, 0};
    case SP_OP_EXPERT_DOWN_SUM:  // the shared expert's down rows, where it reads them and not their dots' pieces
      return {t.operand[5] == SP_NO_VIEW || view(5).dtype == SP_F32 ? 0 : tiles * row_bytes(view(5)), 0};
    case SP_OP_EXPERT_DOWN_SHARED: return {routed + tiles * row_bytes(view(5)), 0};
    case SP_OP_ATTENTION:
    case SP_OP_GATED_ATTENTION: return attention_bytes(g, t, position);
    case SP_OP_GDN: return gdn_bytes(g, t);
    default: return {};  // SAMPLE: logits and step state; PIECE_SUM: partials
  }
}

std::vector<uint64_t> device_bytes(const Graph& g, uint32_t position) {
  std::vector<uint64_t> bytes(g.devices, 0);
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    const TaskBytes b = task_bytes(g, g.tasks[i], position);
    for (uint32_t d = 0; d < g.devices; ++d)
      if (g.runs_on(i, d)) bytes[d] += b.read + b.written;
  }
  return bytes;
}

}  // namespace spindle::cli

#include "tasks/graph.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tasks/error.h"
#include "tasks/gang.h"
#include "tasks/gemv_piece.h"
#include "tasks/gemv_split.h"
#include "tasks/operand_bounds.h"
#include "tasks/op_decls.h"

namespace spindle {
namespace {

[[noreturn]] void fail(const std::string& what) { throw Error("graph: " + what); }

std::string task_label(const Graph& g, size_t i) {
  const char* name = sp_opcode_name(g.tasks[i].op);
  return "task " + std::to_string(i) + " (" + (name ? name : "?") + ")";
}

std::string view_label(const Graph& g, uint32_t v) {
  return "view " + std::to_string(v) + " '" + g.view_names[v] + "'";
}

std::string counter_label(const Graph& g, uint32_t c) {
  return "counter " + std::to_string(c) + " '" + g.counter_names[c] + "'";
}

void check_views(const Graph& g) {
  if (g.view_names.size() != g.views.size())
    fail(std::to_string(g.views.size()) + " views but " + std::to_string(g.view_names.size()) +
         " view names");
  if (g.arenas.size() > SP_MAX_ARENAS)
    fail(std::to_string(g.arenas.size()) + " arenas, more than " +
         std::to_string(SP_MAX_ARENAS));
  for (uint32_t v = 0; v < g.views.size(); ++v) {
    const SpView& view = g.views[v];
    if (view.arena >= g.arenas.size())
      fail(view_label(g, v) + " is in arena " + std::to_string(view.arena) +
           ", but the graph has " + std::to_string(g.arenas.size()) + " arenas");
    if (view.dtype > SP_U32)
      fail(view_label(g, v) + " has unknown dtype " + std::to_string(view.dtype));
    // Ops index a view's elements through typed pointers and, as one array, up to rows x cols.
    if (sp_view_offset(view) % sp_dtype_bytes(view.dtype))
      fail(view_label(g, v) + " starts at byte " + std::to_string(sp_view_offset(view)) + ", not a multiple of its " +
           std::to_string(sp_dtype_bytes(view.dtype)) + "-byte elements");
    if (view.rows > 1 && view.row_stride < view.cols)
      fail(view_label(g, v) + "'s rows overlap: " + std::to_string(view.cols) + " columns " +
           std::to_string(view.row_stride) + " elements apart");
    // 128-bit: (rows-1)*row_stride*4 can exceed 64 bits for garbage views.
    unsigned __int128 elements = 0;
    if (view.rows != 0 && view.cols != 0)
      elements = (unsigned __int128)(view.rows - 1) * view.row_stride + view.cols;
    const unsigned __int128 end = sp_view_offset(view) + elements * sp_dtype_bytes(view.dtype);
    const ArenaInfo& arena = g.arenas[view.arena];
    if (end > arena.bytes)
      fail(view_label(g, v) + " ends at byte " + std::to_string(uint64_t(end)) +
           " (offset " + std::to_string(sp_view_offset(view)) + ", " + std::to_string(view.rows) +
           "x" + std::to_string(view.cols) + ", row stride " + std::to_string(view.row_stride) +
           "), past the " + std::to_string(arena.bytes) + " bytes of arena " +
           std::to_string(view.arena) + " '" + arena.name + "'");
  }
}

void check_io(const Graph& g) {
  const std::pair<const char*, uint32_t> io[] = {{"logits", g.io.logits},
                                                 {"forced_tokens", g.io.forced_tokens},
                                                 {"out_tokens", g.io.out_tokens}};
  for (const auto& [name, v] : io)
    if (v != SP_NO_VIEW && v >= g.views.size())
      fail(std::string("io.") + name + " is view " + std::to_string(v) + ", but the graph has " +
           std::to_string(g.views.size()) + " views");
}

void check_task(const Graph& g, size_t i) {
  const SpTask& t = g.tasks[i];
  if (!sp_opcode_name(t.op))
    fail("task " + std::to_string(i) + " has unknown opcode " + std::to_string(t.op));
  const OpcodeOperands ops = opcode_operands(t.op);
  for (uint32_t k = 0; k < SP_TASK_OPERANDS; ++k) {
    const OperandInfo& info = ops.operand[k];
    const uint32_t v = t.operand[k];
    if (!is_view_kind(info.kind) || (v == SP_NO_VIEW && info.kind == OperandKind::OptionalView)) continue;
    const std::string operand = "operand " + std::to_string(k) + " '" + info.name + "'";
    if (v == SP_NO_VIEW) fail(task_label(g, i) + ": " + operand + " needs a view");
    if (v >= g.views.size())
      fail(task_label(g, i) + ": " + operand + " is view " + std::to_string(v) +
           ", but the graph has " + std::to_string(g.views.size()) + " views");
  }
  if (t.tile_begin > t.tile_end)
    fail(task_label(g, i) + ": tile range [" + std::to_string(t.tile_begin) + ", " +
         std::to_string(t.tile_end) + ") is reversed");
  if (const std::string problem = operand_bounds_problem(g, i); !problem.empty())
    fail(task_label(g, i) + ": " + problem);
  if (t.signal_counter == SP_NO_COUNTER) fail(task_label(g, i) + " signals no counter");
  if (t.signal_counter >= g.num_counters())
    fail(task_label(g, i) + " signals counter " + std::to_string(t.signal_counter) +
         ", but the graph has " + std::to_string(g.num_counters()) + " counters");
  if (t.wait_counter == SP_NO_COUNTER) return;
  if (t.wait_counter >= g.num_counters())
    fail(task_label(g, i) + " waits on counter " + std::to_string(t.wait_counter) +
         ", but the graph has " + std::to_string(g.num_counters()) + " counters");
  if (t.wait_mode != SP_WAIT_SAME_STEP && t.wait_mode != SP_WAIT_PREV_STEP)
    fail(task_label(g, i) + " has unknown wait mode " + std::to_string(t.wait_mode));
}

// A gang (tasks/gang.h) is `width` consecutive records, ranks 0..width-1, alike but for
// their tiles, which follow one another in runs of one length, of an op that runs in phases.
void check_gang(const Graph& g, size_t i) {
  const SpTask& t = g.tasks[i];
  const uint32_t w = sp_gang_width(t), r = t.gang_rank;
  const std::string gang = " of a gang of " + std::to_string(w);
  if (w == 1) {
    if (r != 0) fail(task_label(g, i) + " has rank " + std::to_string(r) + " but is in no gang");
    return;
  }
  if (sp_gang_phases(t.op) < 2) fail(task_label(g, i) + " is in a gang of " + std::to_string(w) + ", but its op cannot gang");
  if (r >= w) fail(task_label(g, i) + " has rank " + std::to_string(r) + gang);
  if (r + 1 < w && (i + 1 == g.tasks.size() || g.tasks[i + 1].gang_rank != r + 1))
    fail(task_label(g, i) + " is rank " + std::to_string(r) + gang + ", but rank " + std::to_string(r + 1) +
         " does not follow it");
  if (r == 0) return;
  if (i == 0 || g.tasks[i - 1].gang_rank != r - 1)
    fail(task_label(g, i) + " is rank " + std::to_string(r) + gang + ", but rank " + std::to_string(r - 1) +
         " does not precede it");
  const SpTask& p = g.tasks[i - 1];
  SpTask same = p;
  same.gang_rank = t.gang_rank;
  same.tile_begin = t.tile_begin;
  same.tile_end = t.tile_end;
  if (std::memcmp(&same, &t, sizeof t) != 0 || t.tile_begin != p.tile_end ||
      t.tile_end - t.tile_begin != p.tile_end - p.tile_begin)
    fail(task_label(g, i) + ", rank " + std::to_string(r) + gang +
         ", is not rank " + std::to_string(r - 1) + "'s record with the next tiles of the same length");
}

// The signals of counter c that device d sees a step: its own tasks' (all tasks' on one
// device), and for a broadcast counter every device's, a task of every device's once for each.
std::vector<std::vector<uint32_t>> signals_seen(const Graph& g) {
  std::vector<std::vector<uint32_t>> seen(g.devices, std::vector<uint32_t>(g.num_counters(), 0));
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    const uint32_t c = g.tasks[i].signal_counter;
    for (uint32_t runner = 0; runner < g.devices; ++runner) {
      if (!g.runs_on(i, runner)) continue;
      if (g.is_broadcast(c))
        for (uint32_t d = 0; d < g.devices; ++d) ++seen[d][c];
      else
        ++seen[runner][c];
    }
  }
  return seen;
}

// Each wait must expect exactly the signals its counter receives per step on each device that
// runs the waiter, and a same-step wait must follow every signaller, or a worker taking tasks
// in order could wait forever.
void check_counters(const Graph& g) {
  const std::vector<std::vector<uint32_t>> seen = signals_seen(g);
  std::vector<size_t> last_signaller(g.num_counters(), 0);
  for (size_t i = 0; i < g.tasks.size(); ++i) last_signaller[g.tasks[i].signal_counter] = i;
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    const SpTask& t = g.tasks[i];
    if (t.wait_counter == SP_NO_COUNTER) continue;
    const uint32_t c = t.wait_counter;
    for (uint32_t d = 0; d < g.devices; ++d) {
      if (!g.runs_on(i, d)) continue;
      if (t.wait_count == 0 || t.wait_count != seen[d][c])
        fail(task_label(g, i) + " waits for " + std::to_string(t.wait_count) + " signals of " + counter_label(g, c) +
             ", but " + std::to_string(seen[d][c]) + " tasks signal it" +
             (g.devices > 1 ? " on device " + std::to_string(d) : std::string()));
    }
    if (t.wait_mode == SP_WAIT_SAME_STEP && last_signaller[c] >= i)
      fail(task_label(g, i) + " waits in the same step on " + counter_label(g, c) +
           ", which " + task_label(g, last_signaller[c]) + " signals at or after it");
  }
}

// The pieces that count in one arrivals word are a split GEMV's rows: pieces 0..S-1 of the
// same rows, split, output, residual and partials, each as often as the others (a word serves
// the same rows again in each layer, the last arrival resetting it). Otherwise the last to
// arrive sums partials not yet written, or the rows' sum never comes.
void check_piece_words(const Graph& g) {
  struct Word {
    size_t first;                 // the first piece counting in it
    std::vector<uint32_t> count;  // how many tasks are each piece
  };
  std::map<std::pair<uint32_t, uint32_t>, Word> words;  // (arrivals view, word) -> its pieces
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    const SpTask& t = g.tasks[i];
    if (t.op != SP_OP_GEMV_PIECE) continue;
    const GemvPiece p = gemv_piece(t);
    const auto [it, fresh] = words.try_emplace({t.operand[5], p.word}, Word{i, std::vector<uint32_t>(p.split.pieces, 0)});
    const SpTask& f = g.tasks[it->second.first];
    if (!fresh && (t.tile_begin != f.tile_begin || t.tile_end != f.tile_end || t.operand[7] != f.operand[7] ||
                   t.operand[2] != f.operand[2] || t.operand[3] != f.operand[3] || t.operand[4] != f.operand[4]))
      fail(task_label(g, i) + " counts in arrivals word " + std::to_string(p.word) + " of " +
           view_label(g, t.operand[5]) + " as " + task_label(g, it->second.first) +
           " does, but for other rows, split, output, residual or partials");
    ++it->second.count[p.index];
  }
  for (const auto& [key, w] : words)
    for (uint32_t j = 1; j < w.count.size(); ++j)
      if (w.count[j] != w.count[0])
        fail("arrivals word " + std::to_string(key.second) + " of " + view_label(g, key.first) + " (" +
             task_label(g, w.first) + "'s) counts piece 0 " + std::to_string(w.count[0]) + " times but piece " +
             std::to_string(j) + " " + std::to_string(w.count[j]) + " times: each of its " +
             std::to_string(w.count.size()) + " pieces must count as often as the others");
}

// The devices sharing each kv head's q-head splits (SpGraphParams::attn_kv_share): N / Hkv over
// more devices than kv heads, else none, and dividing the splits, or a device's share of a kv
// head would have no split to append its K/V rows.
void check_kv_share(const Graph& g) {
  const SpGraphParams& p = g.params;
  const uint64_t Hkv = p.n_kv_heads, N = g.devices, share = p.attn_kv_share > 1 ? p.attn_kv_share : 1;
  const uint64_t want = attn_kv_share_for(g.devices, p.n_kv_heads);
  if (share != want || p.attn_q_splits % share)
    fail("the graph's attn_kv_share " + std::to_string(p.attn_kv_share) + " is not the " + std::to_string(want) +
         " that its " + std::to_string(N) + " devices over its " + std::to_string(Hkv) +
         " kv heads give, or does not divide its " + std::to_string(p.attn_q_splits) + " q-head splits");
}

// A graph over several devices: a device (or every device) for each task, gangs whole on one
// device, broadcast counters that exist, and the symmetric arena written only by tasks that
// tell every device (a broadcast signal) and run on one device (a task of every device would
// write each row N times).
void check_devices(const Graph& g) {
  if (g.devices == 0 || g.devices > Graph::kMaxDevices)
    fail(std::to_string(g.devices) + " devices, not from 1 to " + std::to_string(Graph::kMaxDevices));
  if (g.devices == 1) {
    if (!g.task_device.empty() || !g.broadcast_counters.empty())
      fail("one device, but " + std::to_string(g.task_device.size()) + " task devices and " +
           std::to_string(g.broadcast_counters.size()) + " broadcast counters (a graph of one device has neither)");
    return;
  }
  if (g.task_device.size() != g.tasks.size())
    fail(std::to_string(g.tasks.size()) + " tasks but " + std::to_string(g.task_device.size()) + " task devices");
  for (size_t k = 0; k < g.broadcast_counters.size(); ++k) {
    const uint32_t c = g.broadcast_counters[k];
    if (c >= g.num_counters())
      fail("broadcast counter " + std::to_string(c) + ", but the graph has " + std::to_string(g.num_counters()) +
           " counters");
    if (k > 0 && c <= g.broadcast_counters[k - 1]) fail("the broadcast counters are not in ascending order");
  }
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    const SpTask& t = g.tasks[i];
    const uint32_t d = g.task_device[i];
    if (d != Graph::kEveryDevice && d >= g.devices)
      fail(task_label(g, i) + " runs on device " + std::to_string(d) + ", but the graph has " +
           std::to_string(g.devices) + " devices");
    if (t.gang_rank > 0 && g.task_device[i - 1] != d)
      fail(task_label(g, i) + " is in a gang whose members run on other devices");
    for_each_view_operand(t, [&](uint32_t k, uint32_t v) {
      if (!opcode_operands(t.op).operand[k].written || g.views[v].arena != SP_ARENA_SYMMETRIC) return;
      if (d == Graph::kEveryDevice)
        fail(task_label(g, i) + " runs on every device and writes " + view_label(g, v) +
             " in the symmetric arena, which every device would write");
      if (!g.is_broadcast(t.signal_counter))
        fail(task_label(g, i) + " writes " + view_label(g, v) + " in the symmetric arena but signals " +
             counter_label(g, t.signal_counter) + ", which is not broadcast: the other devices cannot wait for it");
    });
  }
}

}  // namespace

bool Graph::is_broadcast(uint32_t counter) const {
  return std::binary_search(broadcast_counters.begin(), broadcast_counters.end(), counter);
}

void validate(const Graph& g) {
  check_views(g);
  check_io(g);
  if (const std::string problem = graph_layout_problem(g); !problem.empty()) fail(problem);
  for (size_t i = 0; i < g.tasks.size(); ++i) check_task(g, i);
  for (size_t i = 0; i < g.tasks.size(); ++i) check_gang(g, i);
  check_piece_words(g);
  check_devices(g);
  check_kv_share(g);
  check_counters(g);
}

}  // namespace spindle

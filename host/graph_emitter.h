// What the graph builder (host/graph_builder.cpp) and each family's layers (host/models/)
// emit a graph with: views and arenas, stages and tasks, op parameter records, each size
// computed in 64 bits and refused, naming what it comes from, before it is narrowed into a
// 32-bit field.
#pragma once
#include <algorithm>
#include <cstring>
#include <cstdint>
#include <string>
#include <vector>

#include "host/graph_builder.h"
#include "tasks/error.h"

namespace spindle {

inline constexpr uint64_t kAlign = 256;
inline constexpr uint32_t kLayerNone = 0xFFFFFFFFu;
// Sizes are computed in 64 bits and checked against these before they are narrowed into the
// 32-bit fields of a view (rows, columns, row stride: tasks/view.h) or a task (tiles, operands).
inline constexpr uint64_t kMaxU32 = UINT32_MAX;
// The LM head's tasks name their argmax partial slot in the upper 16 bits of operand 5
// (ops/run_task.h), o_proj pieces their rows' arrivals word in those of operand 6
// (tasks/gemv_piece.h).
inline constexpr uint64_t kMaxSlots = 1u << 16;
// 4M task records (256 MiB): ten times a qwen3-32b graph at 8 rows a task. Past it the options
// ask for absurdly small tiles or many chunks, and the graph is refused before it is built.
inline constexpr uint64_t kMaxTasks = 1u << 22;
// 256 TiB, more than any host or device holds; keeps every offset sum far from wrapping 64 bits.
inline constexpr uint64_t kMaxArenaBytes = uint64_t(1) << 48;

inline uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
inline uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Throws unless value <= most; `what` names the options and fields `value` comes from, `limit`
// what bounds it and, where there is one, the remedy.
inline void check_at_most(uint64_t value, uint64_t most, const std::string& what, const std::string& limit) {
  if (value > most)
    throw Error(what + " = " + std::to_string(value) + ", more than the " + std::to_string(most) + " " + limit);
}
inline uint32_t narrow(uint64_t value, const std::string& what) {
  check_at_most(value, kMaxU32, what, "a 32-bit view or task field holds");
  return uint32_t(value);
}

// Layer l's prefix of stage and buffer names, "L{l}." (appended: GCC 12 warns falsely,
// -Wrestrict, on "…" + std::string inlined).
inline std::string layer_tag(uint32_t l) {
  std::string tag = "L";
  tag += std::to_string(l);
  tag += '.';
  return tag;
}

// A stage: the tasks that signal one counter. Each task of a stage waits for the whole previous
// stage unless said otherwise, so stages act as barriers and every buffer may be reused layer
// after layer without write-after-read hazards.
struct Stage {
  uint32_t counter;
  uint32_t tasks;
};

class GraphEmitter {
 public:
  GraphEmitter(const ModelWeights& w, const BuildOptions& opt) : w_(w), opt_(opt) { g_.devices = opt.devices; }

  Graph& graph() { return g_; }
  const ModelWeights& weights() const { return w_; }
  const BuildOptions& options() const { return opt_; }

  uint32_t add_view(const std::string& name, uint32_t arena, SpDtype dt, uint64_t offset,
                    uint64_t rows, uint64_t cols) {
    if (rows > kMaxU32 || cols > kMaxU32)
      throw Error("view '" + name + "' of " + std::to_string(rows) + "x" + std::to_string(cols) +
                  ": a view's rows and columns are 32-bit (at most " + std::to_string(kMaxU32) + ")");
    SpView v{};
    v.arena = arena;
    v.dtype = dt;
    v.offset_lo = uint32_t(offset);
    v.offset_hi = uint32_t(offset >> 32);
    v.rows = uint32_t(rows);
    v.cols = uint32_t(cols);
    v.row_stride = uint32_t(cols);
    g_.views.push_back(v);
    g_.view_names.push_back(name);
    return uint32_t(g_.views.size() - 1);
  }
  uint32_t alloc(const std::string& name, uint32_t arena, SpDtype dt, uint64_t rows, uint64_t cols) {
    const uint32_t id = add_view(name, arena, dt, g_.arenas[arena].bytes, rows, cols);
    ArenaInfo& a = g_.arenas[arena];
    // rows and cols are 32-bit now, so the product cannot wrap; the sum is bounded below.
    const uint64_t end = a.bytes + rows * cols * sp_dtype_bytes(dt);
    check_at_most(end, kMaxArenaBytes, "arena '" + a.name + "' with view '" + name + "' (" + std::to_string(rows) +
                  "x" + std::to_string(cols) + ")", "bytes an arena may have");
    a.bytes = align_up(end, kAlign);
    return id;
  }
  // Columns [c0, c0+cols) of a 1-row vector view, as a view of its own.
  uint32_t slice(uint32_t view, const std::string& name, uint64_t c0, uint64_t cols) {
    const SpView v = g_.views[view];
    return add_view(name, v.arena, SpDtype(v.dtype),
                    sp_view_offset(v) + c0 * sp_dtype_bytes(v.dtype), 1, cols);
  }
  // Columns [c0, c0+cols) of every row of a matrix view, as a view of its own (the same row
  // stride).
  uint32_t columns(uint32_t view, const std::string& name, uint64_t c0, uint64_t cols) {
    const SpView v = g_.views[view];
    const uint32_t id = add_view(name, v.arena, SpDtype(v.dtype),
                                 sp_view_offset(v) + c0 * sp_dtype_bytes(v.dtype), v.rows, cols);
    g_.views[id].row_stride = v.row_stride;
    return id;
  }
  // Rows [r0, r0+rows) of a matrix view, as a view of its own.
  uint32_t rows(uint32_t view, const std::string& name, uint64_t r0, uint64_t rows) {
    const SpView v = g_.views[view];
    const uint32_t id = add_view(name, v.arena, SpDtype(v.dtype),
                                 sp_view_offset(v) + r0 * v.row_stride * sp_dtype_bytes(v.dtype), rows, v.cols);
    g_.views[id].row_stride = v.row_stride;
    return id;
  }
  // The weight tensor `name` of `shape` as a view: its last dimension the columns, the others
  // the rows (a fused [E, rows, cols] tensor is E·rows rows).
  uint32_t weight(const std::string& name, std::vector<uint64_t> shape) {
    const TensorRef& t = w_.get(name, shape);
    uint64_t rows = 1;
    for (size_t d = 0; d + 1 < shape.size(); ++d) rows *= shape[d];  // within the loader's 64-bit sizes
    return add_view(name, SP_ARENA_WEIGHTS0 + t.arena, SP_BF16, t.offset, rows, shape.back());
  }

  // A stage; `broadcast`: its signals reach every device (graph.h broadcast_counters).
  Stage begin_stage(const std::string& name, bool broadcast = false) {
    g_.counter_names.push_back(name);
    const uint32_t id = uint32_t(g_.counter_names.size() - 1);
    if (broadcast) g_.broadcast_counters.push_back(id);
    return Stage{id, 0};
  }
  // The device the tasks added next run on (Graph::kEveryDevice: all of them, the default).
  void on_device(uint32_t d) { device_ = d; }
  // Refuses the `n` tasks `stage` is about to add when they would take the graph past kMaxTasks,
  // before they are allocated.
  void reserve_tasks(uint64_t n, const Stage& stage) const {
    check_at_most(g_.tasks.size() + n, kMaxTasks,
                  "the graph's tasks with the " + std::to_string(n) + " of stage '" +
                      g_.counter_names[stage.counter] + "'",
                  "a graph may have (raise rows_per_tile, or lower stage_tasks or attn_chunks)");
  }
  // Appends a task of `stage` waiting on the whole of `prev`.
  void add_task(Stage& stage, const Stage& prev, uint32_t wait_mode, uint32_t op, uint32_t layer,
                uint32_t t0, uint32_t t1, std::initializer_list<uint32_t> operands) {
    reserve_tasks(1, stage);
    SpTask t{};
    t.op = op;
    t.layer = layer;
    t.tile_begin = t0;
    t.tile_end = t1;
    t.wait_counter = prev.counter;
    t.wait_count = prev.tasks;
    t.wait_mode = wait_mode;
    t.signal_counter = stage.counter;
    std::fill(std::begin(t.operand), std::end(t.operand), SP_NO_VIEW);
    std::copy(operands.begin(), operands.end(), t.operand);
    g_.tasks.push_back(t);
    if (g_.devices > 1) g_.task_device.push_back(device_);
    // Stage::tasks counts the signals each device sees: every signal of a broadcast stage, a
    // task of every device once for each; of a local stage, one device's (validate() checks
    // that each device sees as many, so device 0's tasks count them).
    const bool every = device_ == Graph::kEveryDevice;
    if (g_.is_broadcast(stage.counter)) stage.tasks += every ? g_.devices : 1;
    else if (every || device_ == 0) ++stage.tasks;
  }
  // Splits [begin, end) into tasks of `per` tiles for `stage`, counting in 64 bits so that a
  // `per` near 2^32 cannot wrap the next tile index.
  template <class F>
  void split(const Stage& stage, uint32_t begin, uint32_t end, uint32_t per, F&& f) {
    reserve_tasks(ceil_div(end - begin, per), stage);
    for (uint64_t t0 = begin; t0 < end; t0 += per) f(uint32_t(t0), uint32_t(std::min<uint64_t>(end, t0 + per)));
  }
  // Rows per task of a projection stage with `stage_rows` output rows in all.
  uint32_t rows_per_task(uint32_t stage_rows) const {
    return opt_.rows_per_tile ? opt_.rows_per_tile : rows_per_task_for(stage_rows, opt_.stage_tasks);
  }
  // Rows per task of the stages a kv head of `heads` (kv_head_waits), each of qd q rows, kd k
  // rows and kd v rows: the fewest (a multiple of 8) whose tasks, each within one matrix, number
  // at most stage_tasks / heads, so that the heads' stages together have no more tasks than
  // stage_tasks (qwen3-8b at 48 rows had 136 for 132 blocks: 8% slower); or qd rows, 3 tasks a
  // head, when stage_tasks / heads is fewer.
  uint32_t head_rows_per_task(uint32_t qd, uint32_t kd, uint32_t heads) const {
    if (opt_.rows_per_tile) return opt_.rows_per_tile;
    const uint32_t most = std::max(1u, opt_.stage_tasks / heads);
    uint32_t per = rows_per_task_for(qd + 2 * kd, most);  // qd + 2 kd: a layer's q, k and v rows, within 32 bits
    while (per < qd && ceil_div(qd, per) + 2 * ceil_div(kd, per) > most) per += 8;
    return per;
  }
  // Tasks of `per` rows over W's rows [r0, r1).
  void gemv(Stage& st, const Stage& prev, uint32_t layer, uint32_t W, uint32_t r0, uint32_t r1, uint32_t per,
            uint32_t x, uint32_t norm, uint32_t out, uint32_t residual, GemvSplit dot_split = {}) {
    const uint32_t word = gemv_split_word(dot_split.pieces, dot_split.group);
    split(st, r0, r1, per, [&](uint32_t t0, uint32_t t1) {
      add_task(st, prev, SP_WAIT_SAME_STEP, SP_OP_GEMV, layer, t0, t1,
               {W, x, norm, out, residual, 0u, SP_NO_VIEW, word});
    });
  }
  // Throws when `s` cannot split rows of K columns; `what` names the projection.
  static void check_split(const GemvSplit& s, uint32_t K, const char* what) {
    if (s.pieces < 2 && s.group > 1)
      throw Error(std::string(what) + " split: groups of " + std::to_string(s.group) + " but fewer than 2 pieces");
    if (s.pieces > 0xFFFFu || s.group > 0xFFFFu)
      throw Error(std::string(what) + " split " + std::to_string(s.pieces) + "/" + std::to_string(s.group) +
                  ": at most 65535 pieces and 65535 a group");
    if (const char* problem = gemv_split_problem(gemv_split_word(s.pieces, s.group), K))
      throw Error(std::string(what) + " split " + std::to_string(s.pieces) + "/" + std::to_string(s.group) + ": " +
                  problem + " (" + std::to_string(K) + " columns)");
  }

  // A row-parallel projection over the graph's devices (docs/multi-device.md): device d's
  // PIECE_DOTS tasks over W's columns [d K/N, (d+1) K/N) and x's, into partial row d of a
  // symmetric partials view, signalling every device; then every device's PIECE_SUM tasks
  // summing the N rows into out = r(res + r(y)): the bits of a GEMV split {N, N}. Returns the
  // sums' stage.
  Stage row_parallel(const std::string& name, const Stage& prev, uint32_t layer, uint32_t W, uint32_t x,
                     uint32_t out, uint32_t residual) {
    const uint32_t N = g_.devices, rows = g_.views[W].rows, P = g_.views[W].cols / N;
    // Each exchange its own partials: a device's next write of them is a step later, after every
    // device ended the step (build_graph's samplers signal every device), so after every device
    // read them.
    const uint32_t partials = alloc(name + ".partials", SP_ARENA_SYMMETRIC, SP_F32, N, rows), per = rows_per_task(rows);
    Stage dots = begin_stage(name, true);
    for (uint32_t d = 0; d < N; ++d) {
      on_device(d);
      const std::string piece = ".d" + std::to_string(d);
      const uint32_t w_d = columns(W, g_.view_names[W] + piece, uint64_t(d) * P, P);
      const uint32_t x_d = slice(x, g_.view_names[x] + piece, uint64_t(d) * P, P);
      split(dots, 0, rows, per, [&](uint32_t r0, uint32_t r1) {
        add_task(dots, prev, SP_WAIT_SAME_STEP, SP_OP_PIECE_DOTS, layer, r0, r1, {w_d, x_d, partials, d});
      });
    }
    on_device(Graph::kEveryDevice);
    Stage sums = begin_stage(name + ".sum");
    split(sums, 0, rows, per, [&](uint32_t r0, uint32_t r1) {
      add_task(sums, dots, SP_WAIT_SAME_STEP, SP_OP_PIECE_SUM, layer, r0, r1,
               {partials, out, residual, gemv_split_word(N, N)});
    });
    return sums;
  }

  // A new op parameter record (tasks/op_params.h), by index.
  template <class Record>
  uint32_t add_params(const Record& r) {
    static_assert(sizeof(Record) == sizeof(SpOpParams));
    SpOpParams p;
    std::memcpy(&p, &r, sizeof p);
    g_.op_params.push_back(p);
    return uint32_t(g_.op_params.size() - 1);
  }

 private:
  const ModelWeights& w_;
  const BuildOptions& opt_;
  Graph g_;
  uint32_t device_ = Graph::kEveryDevice;
};

}  // namespace spindle

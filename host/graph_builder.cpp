#include "host/graph_builder.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "tasks/error.h"
#include "tasks/gemv_piece.h"

namespace spindle {
namespace {

constexpr uint64_t kAlign = 256;
constexpr uint32_t kLayerNone = 0xFFFFFFFFu;
// Sizes are computed in 64 bits and checked against these before they are narrowed into the
// 32-bit fields of a view (rows, columns, row stride: tasks/view.h) or a task (tiles, operands).
constexpr uint64_t kMaxU32 = UINT32_MAX;
// The LM head's tasks name their argmax partial slot in the upper 16 bits of operand 5
// (ops/run_task.h), o_proj pieces their rows' arrivals word in those of operand 6
// (tasks/gemv_piece.h).
constexpr uint64_t kMaxSlots = 1u << 16;
// 4M task records (256 MiB): ten times a qwen3-32b graph at 8 rows a task. Past it the options
// ask for absurdly small tiles or many chunks, and the graph is refused before it is built.
constexpr uint64_t kMaxTasks = 1u << 22;
// 256 TiB, more than any host or device holds; keeps every offset sum far from wrapping 64 bits.
constexpr uint64_t kMaxArenaBytes = uint64_t(1) << 48;

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Throws unless value <= most; `what` names the options and fields `value` comes from, `limit`
// what bounds it and, where there is one, the remedy.
void check_at_most(uint64_t value, uint64_t most, const std::string& what, const std::string& limit) {
  if (value > most)
    throw Error(what + " = " + std::to_string(value) + ", more than the " + std::to_string(most) + " " + limit);
}
uint32_t narrow(uint64_t value, const std::string& what) {
  check_at_most(value, kMaxU32, what, "a 32-bit view or task field holds");
  return uint32_t(value);
}

// Builds the graph stage by stage. A stage is the set of tasks that signal one counter; each
// task of a stage waits for the whole previous stage, so stages act as barriers and every
// buffer may be reused layer after layer without write-after-read hazards.
class Builder {
 public:
  Builder(const ModelWeights& w, const BuildOptions& opt) : w_(w), opt_(opt) {}

  Graph build();

 private:
  struct Stage {
    uint32_t counter;
    uint32_t tasks;
  };

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
  uint32_t weight(const std::string& name, std::vector<uint64_t> shape) {
    const TensorRef& t = w_.get(name, shape);
    return add_view(name, SP_ARENA_WEIGHTS0 + t.arena, SP_BF16, t.offset, shape.size() == 2 ? shape[0] : 1,
                    shape.back());
  }

  Stage begin_stage(const std::string& name) {
    g_.counter_names.push_back(name);
    return Stage{uint32_t(g_.counter_names.size() - 1), 0};
  }
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
    ++stage.tasks;
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

  const ModelWeights& w_;
  const BuildOptions& opt_;
  Graph g_;
};

Graph Builder::build() {
  const ModelConfig& c = w_.config;
  if (c.family != Family::Qwen3)
    throw Error(std::string("the graph builder does not support the ") + family_name(c.family) +
                " family yet (supported: qwen3)");
  // The config's limits keep each dimension, and so a layer's rows, within 32 bits; a config
  // built in code has not met them yet.
  validate(c, w_.source);
  const uint32_t H = c.hidden, Hq = c.n_heads, Hkv = c.n_kv_heads, D = c.head_dim;
  const uint32_t I = c.intermediate, V = c.vocab;
  const uint32_t q_rows = narrow(uint64_t(Hq) * D, "num_attention_heads × head_dim");
  const uint32_t kv_rows = narrow(uint64_t(Hkv) * D, "num_key_value_heads × head_dim");
  const uint32_t qkv_rows =
      narrow(uint64_t(q_rows) + 2 * uint64_t(kv_rows), "(num_attention_heads + 2 × num_key_value_heads) × head_dim");
  const uint32_t ctx = opt_.context ? opt_.context : c.max_position;
  if (opt_.context > c.max_position)
    throw Error("context " + std::to_string(opt_.context) + " exceeds the model's limit " +
                std::to_string(c.max_position) + " (max_position_embeddings)");
  if (opt_.rows_per_tile == 0 && opt_.stage_tasks == 0)
    throw Error("stage_tasks must be at least 1 (or rows_per_tile given)");
  const uint32_t chunks = opt_.attn_chunks ? opt_.attn_chunks : attn_chunks_for_context(ctx, Hkv);
  if (chunks > ctx)
    throw Error("attention chunks " + std::to_string(chunks) + " exceed the context's " + std::to_string(ctx) +
                " positions");
  const uint32_t max_steps = opt_.max_steps ? opt_.max_steps : ctx;
  if (max_steps > ctx)
    throw Error("max_steps " + std::to_string(max_steps) + " exceeds the context's " + std::to_string(ctx) +
                " positions (each step takes one)");
  const uint32_t kv_cache_rows =
      narrow(2 * uint64_t(Hkv) * ctx, "a layer's KV cache rows, 2 × num_key_value_heads (" + std::to_string(Hkv) +
                                          ") × context (" + std::to_string(ctx) + ")");
  const uint32_t partial_rows =
      narrow(uint64_t(Hq) * chunks, "the attention partials' rows, num_attention_heads (" + std::to_string(Hq) +
                                        ") × attention chunks (" + std::to_string(chunks) + ")");
  const uint32_t lm_rows = rows_per_task(V);
  const uint64_t slots = ceil_div(V, lm_rows);
  check_at_most(slots, kMaxSlots,
                "the LM head's tasks, vocab_size (" + std::to_string(V) + ") / rows per task (" +
                    std::to_string(lm_rows) + ") rounded up",
                "argmax slots its tasks can name (raise rows_per_tile or lower stage_tasks)");
  check_split(opt_.o_proj_split, q_rows, "o_proj");
  check_split(opt_.down_split, I, "down");
  check_split(opt_.fused_mlp, I, "fused MLP");
  const GemvSplit mlp = gemv_split(gemv_split_word(opt_.fused_mlp.pieces, opt_.fused_mlp.group));
  if (mlp.pieces > 1 && opt_.down_split.pieces > 1)
    throw Error("the fused MLP sums down's dots itself (as a down split pieces/group); a down split does not apply");
  if (mlp.group > 255)
    throw Error("fused MLP gangs of " + std::to_string(mlp.group) + ": at most 255 members a gang");

  g_.model = w_.source;
  SpGraphParams& p = g_.params;
  p.hidden = H;
  p.n_layers = c.n_layers;
  p.n_heads = Hq;
  p.n_kv_heads = Hkv;
  p.head_dim = D;
  p.rotary_dim = c.rotary_dim();
  p.intermediate = I;
  p.vocab = V;
  p.context = ctx;
  p.attn_chunks = chunks;
  p.norm_kind = SP_NORM_STANDARD;
  p.rms_eps = c.rms_eps;
  p.rope_theta = c.rope_theta;
  p.max_steps = max_steps;

  g_.arenas = {{"state", SP_STATE_FORCED_OFFSET}, {"work", 0}, {"kv", 0}, {"const", 0}};
  for (const HostArena& a : w_.arenas) g_.arenas.push_back({"weights:" + a.name, a.bytes});

  g_.io.forced_tokens = add_view("forced_tokens", SP_ARENA_STATE, SP_U32, SP_STATE_FORCED_OFFSET, 1, max_steps);
  g_.io.out_tokens = add_view("out_tokens", SP_ARENA_STATE, SP_U32,
                              SP_STATE_FORCED_OFFSET + uint64_t(max_steps) * 4, 1, max_steps);
  g_.arenas[SP_ARENA_STATE].bytes = SP_STATE_FORCED_OFFSET + uint64_t(max_steps) * 8;

  const uint32_t h = alloc("h", SP_ARENA_WORK, SP_BF16, 1, H);
  const uint32_t qkv = alloc("qkv", SP_ARENA_WORK, SP_BF16, 1, qkv_rows);
  const uint32_t q_part = slice(qkv, "qkv.q", 0, q_rows);
  const uint32_t k_part = slice(qkv, "qkv.k", q_rows, kv_rows);
  const uint32_t v_part = slice(qkv, "qkv.v", uint64_t(q_rows) + kv_rows, kv_rows);
  const uint32_t partials = alloc("attn_partials", SP_ARENA_WORK, SP_F32, partial_rows, uint64_t(D) + 2);
  const uint32_t attn_out = alloc("attn_out", SP_ARENA_WORK, SP_BF16, 1, q_rows);
  const uint32_t arrivals = alloc("attn_arrivals", SP_ARENA_WORK, SP_U32, 1, Hkv);
  const uint32_t act = mlp.pieces > 1 ? 0 : alloc("act", SP_ARENA_WORK, SP_BF16, 1, I);
  const uint32_t mlp_partials =
      mlp.pieces > 1 ? alloc("mlp_partials", SP_ARENA_WORK, SP_F32, uint64_t(mlp.pieces) + mlp.pieces / mlp.group, H)
                     : 0;
  const uint32_t mlp_arrivals = mlp.pieces > 1 ? alloc("mlp_arrivals", SP_ARENA_WORK, SP_U32, 1, mlp.group) : 0;
  // o_proj as pieces a kv head (BuildOptions::kv_head_waits with an o_proj split a kv head).
  const uint32_t o_split_word = gemv_split_word(opt_.o_proj_split.pieces, opt_.o_proj_split.group);
  const bool o_pieces = opt_.kv_head_waits && Hkv > 1 && gemv_split(o_split_word).pieces == Hkv;
  const uint32_t o_piece_rows =
      opt_.rows_per_tile ? opt_.rows_per_tile : rows_per_task_for(H, std::max(1u, opt_.stage_tasks / Hkv));
  const uint64_t o_words = ceil_div(H, o_piece_rows);
  if (o_pieces)
    check_at_most(o_words, kMaxSlots,
                  "o_proj's arrivals words, hidden_size (" + std::to_string(H) + ") / rows per task (" +
                      std::to_string(o_piece_rows) + ") rounded up",
                  "a piece task can name (raise rows_per_tile)");
  const uint32_t o_partials = o_pieces ? alloc("o_proj_partials", SP_ARENA_WORK, SP_F32, Hkv, H) : 0;
  const uint32_t o_arrivals = o_pieces ? alloc("o_proj_arrivals", SP_ARENA_WORK, SP_U32, 1, o_words) : 0;
  g_.io.logits = alloc("logits", SP_ARENA_WORK, SP_F32, 1, V);
  const uint32_t rope = alloc("rope_table", SP_ARENA_CONST, SP_BF16, ctx, p.rotary_dim);

  const uint32_t embed_w = weight("model.embed_tokens.weight", {V, H});

  // The first stage waits for the previous step's sampler; its counter is the last one.
  Stage sample_stage{0, 1};
  Stage embed = begin_stage("embed");
  const uint32_t sample_counter_slot = uint32_t(g_.tasks.size());
  add_task(embed, sample_stage, SP_WAIT_PREV_STEP, SP_OP_EMBED, kLayerNone, 0, H, {embed_w, h});

  Stage prev = embed;
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    const std::string L = "model.layers." + std::to_string(l) + ".";
    const std::string tag = "L" + std::to_string(l) + ".";
    const uint32_t in_norm = weight(L + "input_layernorm.weight", {H});
    const uint32_t wq = weight(L + "self_attn.q_proj.weight", {q_rows, H});
    const uint32_t wk = weight(L + "self_attn.k_proj.weight", {kv_rows, H});
    const uint32_t wv = weight(L + "self_attn.v_proj.weight", {kv_rows, H});
    const uint32_t wo = weight(L + "self_attn.o_proj.weight", {H, q_rows});
    const uint32_t qn = weight(L + "self_attn.q_norm.weight", {D});
    const uint32_t kn = weight(L + "self_attn.k_norm.weight", {D});
    const uint32_t post_norm = weight(L + "post_attention_layernorm.weight", {H});
    const uint32_t wg = weight(L + "mlp.gate_proj.weight", {I, H});
    const uint32_t wu = weight(L + "mlp.up_proj.weight", {I, H});
    const uint32_t wd = weight(L + "mlp.down_proj.weight", {H, I});
    const uint32_t kv_cache = alloc(tag + "kv_cache", SP_ARENA_KV, SP_BF16, kv_cache_rows, D);

    // q, k and v: one stage, or with kv_head_waits one a kv head g holding the rows of g's q
    // heads, k and v, so that g's attention waits for those alone.
    std::vector<Stage> s_qkv;
    const uint32_t heads = opt_.kv_head_waits ? Hkv : 1, qd = Hq / heads * D, kd = Hkv / heads * D;
    const uint32_t qkv_per = opt_.kv_head_waits ? head_rows_per_task(qd, kd, heads) : rows_per_task(qkv_rows);
    for (uint32_t g = 0; g < heads; ++g) {
      Stage st = begin_stage(tag + "qkv" + (opt_.kv_head_waits ? ".kv" + std::to_string(g) : ""));
      gemv(st, prev, l, wq, g * qd, (g + 1) * qd, qkv_per, h, in_norm, q_part, SP_NO_VIEW);
      gemv(st, prev, l, wk, g * kd, (g + 1) * kd, qkv_per, h, in_norm, k_part, SP_NO_VIEW);
      gemv(st, prev, l, wv, g * kd, (g + 1) * kd, qkv_per, h, in_norm, v_part, SP_NO_VIEW);
      s_qkv.push_back(st);
    }

    // One task per (kv head, chunk): q/k norms, RoPE, the KV append, attention and the merge;
    // one stage, or with o_proj in pieces a kv head one a kv head.
    std::vector<Stage> s_attn;
    for (uint32_t g = 0; g < Hkv; ++g) {
      if (g == 0 || o_pieces) {
        s_attn.push_back(begin_stage(tag + "attention" + (o_pieces ? ".kv" + std::to_string(g) : "")));
        reserve_tasks(o_pieces ? chunks : uint64_t(Hkv) * chunks, s_attn.back());
      }
      // Tiles below Hkv × chunks <= Hq × chunks, the partials' 32-bit rows.
      for (uint32_t t = g * chunks; t < (g + 1) * chunks; ++t)
        add_task(s_attn.back(), s_qkv[opt_.kv_head_waits ? g : 0], SP_WAIT_SAME_STEP, SP_OP_ATTENTION, l, t, t + 1,
                 {qkv, qn, kn, kv_cache, rope, partials, attn_out, arrivals});
    }

    // o_proj: rows of whole dots, or pieces a kv head g over g's columns waiting for g's attention.
    Stage s_o = begin_stage(tag + "o_proj");
    if (o_pieces) {
      const uint32_t P = q_rows / Hkv;
      for (uint32_t g = 0; g < Hkv; ++g) {
        const std::string kv = ".kv" + std::to_string(g);
        const uint32_t w_g = columns(wo, L + "self_attn.o_proj.weight" + kv, g * P, P);
        const uint32_t x_g = slice(attn_out, "attn_out" + kv, g * P, P);
        split(s_o, 0, H, o_piece_rows, [&](uint32_t r0, uint32_t r1) {
          add_task(s_o, s_attn[g], SP_WAIT_SAME_STEP, SP_OP_GEMV_PIECE, l, r0, r1,
                   {w_g, x_g, h, h, o_partials, o_arrivals, gemv_piece_word(g, r0 / o_piece_rows), o_split_word});
        });
      }
    } else {
      gemv(s_o, s_attn[0], l, wo, 0, H, rows_per_task(H), attn_out, SP_NO_VIEW, h, h, opt_.o_proj_split);
    }

    if (mlp.pieces > 1) {
      Stage s_mlp = begin_stage(tag + "mlp");
      const uint32_t P = I / mlp.pieces;
      for (uint32_t j = 0; j < mlp.pieces; ++j) {
        add_task(s_mlp, s_o, SP_WAIT_SAME_STEP, SP_OP_MLP, l, j * P, (j + 1) * P,
                 {wg, wu, wd, h, post_norm, mlp_partials, mlp_arrivals});
        g_.tasks.back().gang_width = uint8_t(mlp.group);
        g_.tasks.back().gang_rank = uint8_t(mlp.group > 1 ? j % mlp.group : 0);
      }
      prev = s_mlp;
      continue;
    }
    Stage s_gu = begin_stage(tag + "gate_up");
    split(s_gu, 0, I, rows_per_task(I), [&](uint32_t r0, uint32_t r1) {
      add_task(s_gu, s_o, SP_WAIT_SAME_STEP, SP_OP_GATE_UP, l, r0, r1, {wg, wu, h, post_norm, act});
    });

    Stage s_down = begin_stage(tag + "down");
    gemv(s_down, s_gu, l, wd, 0, H, rows_per_task(H), act, SP_NO_VIEW, h, h, opt_.down_split);
    prev = s_down;
  }

  const uint32_t final_norm = weight("model.norm.weight", {H});
  const uint32_t lm = weight("lm_head.weight", {V, H});
  const uint32_t argmax = alloc("argmax_partials", SP_ARENA_WORK, SP_U32, slots, 2);
  Stage s_lm = begin_stage("lm_head");
  split(s_lm, 0, V, lm_rows, [&](uint32_t r0, uint32_t r1) {
    const uint32_t flags = 1u | ((r0 / lm_rows) << 16);
    add_task(s_lm, prev, SP_WAIT_SAME_STEP, SP_OP_GEMV, kLayerNone, r0, r1,
             {lm, h, final_norm, g_.io.logits, SP_NO_VIEW, flags, argmax, 0u});
  });

  Stage s_sample = begin_stage("sample");
  add_task(s_sample, s_lm, SP_WAIT_SAME_STEP, SP_OP_SAMPLE, kLayerNone, 0, 1,
           {g_.io.logits, argmax, uint32_t(slots), g_.io.forced_tokens, g_.io.out_tokens});

  g_.tasks[sample_counter_slot].wait_counter = s_sample.counter;
  g_.tasks[sample_counter_slot].wait_count = s_sample.tasks;
  g_.arenas[SP_ARENA_KV].bytes = std::max<uint64_t>(g_.arenas[SP_ARENA_KV].bytes, kAlign);
  validate(g_);
  return std::move(g_);
}

}  // namespace

uint32_t rows_per_task_for(uint32_t rows, uint32_t stage_tasks) {
  constexpr uint64_t multiple = 8;
  // The largest multiple of 8 in 32 bits bounds it: rows near 2^32 take two tasks, not zero rows each.
  const uint64_t per = align_up(std::max(multiple, ceil_div(rows, stage_tasks)), multiple);
  return uint32_t(std::min(per, kMaxU32 / multiple * multiple));
}

uint32_t attn_chunks_for_context(uint32_t context, uint32_t kv_heads) {
  const uint64_t most = std::max(1u, 128 / std::max(1u, kv_heads));
  return uint32_t(std::clamp<uint64_t>(ceil_div(context, 256), 1, most));
}

Graph build_decode_graph(const ModelWeights& w, const BuildOptions& opt) {
  return Builder(w, opt).build();
}

}  // namespace spindle

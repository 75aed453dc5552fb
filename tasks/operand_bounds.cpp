#include "tasks/operand_bounds.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "tasks/gemv_piece.h"
#include "tasks/mlp_shape.h"
#include "tasks/operands.h"

namespace spindle {
namespace {

// Thrown by the checks below and caught where the problem is returned.
struct Refusal {
  std::string why;
};

[[noreturn]] void refuse(std::string why) { throw Refusal{std::move(why)}; }

// Attention's dimensions at most: beyond any model's (the config allows a head dim of 1024),
// and small enough that a head's shared memory (chunks x (head dim + 2) floats for the merge),
// counted in 32 bits, cannot wrap.
constexpr uint64_t kMaxHeadDim = 4096, kMaxAttnChunks = 1u << 16;

const char* dtype_name(uint32_t dt) { return dt == SP_BF16 ? "bf16" : dt == SP_F32 ? "f32" : "u32"; }

std::string str(uint64_t n) { return std::to_string(n); }

// Elements a view holds read as one array from its first: its rows do not overlap
// (validate() checks row_stride >= cols), so these are inside its extent.
uint64_t elements(const SpView& v) { return uint64_t(v.rows) * v.cols; }

// The task's operands, checked for what its op reads and writes.
class Operands {
 public:
  Operands(const Graph& g, const SpTask& t) : g_(g), t_(t), info_(opcode_operands(t.op)) {}

  bool present(uint32_t k) const { return t_.operand[k] != SP_NO_VIEW; }
  const SpView& view(uint32_t k) const { return g_.views[t_.operand[k]]; }

  // Operand k is one of `dtypes` and holds at least n elements as one array.
  void array(uint32_t k, std::initializer_list<SpDtype> dtypes, uint64_t n, const char* what) const {
    dtype(k, dtypes);
    if (elements(view(k)) < n)
      refuse(name(k) + " holds " + str(elements(view(k))) + " elements, fewer than the " + str(n) + " " + what);
  }

  // Operand k is of dtype dt with at least `rows` rows of at least `cols` columns.
  void matrix(uint32_t k, SpDtype dt, uint64_t rows, uint64_t cols, const char* what) const {
    dtype(k, {dt});
    const SpView& v = view(k);
    if (v.rows < rows || v.cols < cols)
      refuse(name(k) + " is " + str(v.rows) + "x" + str(v.cols) + ", smaller than the " + str(rows) + "x" +
             str(cols) + " " + what);
  }

  // No operand the op writes is in a weight arena: executors map those read-only.
  void check_written() const {
    for (uint32_t k = 0; k < SP_TASK_OPERANDS; ++k)
      if (info_.operand[k].written && present(k) && view(k).arena >= SP_ARENA_WEIGHTS0)
        refuse(name(k) + " is written, but lies in weight arena " + str(view(k).arena));
  }

  // Operand k has operand j's columns and row stride (the op reads both through j's).
  void same_rows(uint32_t k, uint32_t j) const {
    if (view(k).cols != view(j).cols || view(k).row_stride != view(j).row_stride)
      refuse(name(k) + " has " + str(view(k).cols) + " columns " + str(view(k).row_stride) + " apart, but " +
             name(j) + " " + str(view(j).cols) + " columns " + str(view(j).row_stride) +
             " apart: the op reads both with the latter's");
  }

 private:
  std::string name(uint32_t k) const {
    return "operand " + str(k) + " '" + info_.operand[k].name + "' (view " + str(t_.operand[k]) + " '" +
           g_.view_names[t_.operand[k]] + "')";
  }

  void dtype(uint32_t k, std::initializer_list<SpDtype> dtypes) const {
    for (SpDtype dt : dtypes)
      if (view(k).dtype == dt) return;
    std::string want;
    for (SpDtype dt : dtypes) want += (want.empty() ? "" : " or ") + std::string(dtype_name(dt));
    refuse(name(k) + " is " + dtype_name(view(k).dtype) + ", not " + want);
  }

  const Graph& g_;
  const SpTask& t_;
  OpcodeOperands info_;
};

void check_embed(const SpTask& t, const Operands& o) {
  o.matrix(0, SP_BF16, 1, t.tile_end, "columns the tiles copy");  // the token's row: checked when it runs
  o.array(1, {SP_BF16}, t.tile_end, "columns the tiles write");
}

// A projection's row length (K) at most: longer than any model's rows (the config allows
// 2^20 intermediate columns), and short enough that the executors' shared-memory sizes for a
// row, counted in 32 bits, cannot wrap.
constexpr uint32_t kMaxRowLength = 1u << 20;

void check_row_length(const Operands& o, uint32_t k) {
  if (o.view(k).cols > kMaxRowLength)
    refuse("its rows of " + str(o.view(k).cols) + " columns are longer than the " + str(kMaxRowLength) +
           " a projection takes");
}

void check_gemv(const SpTask& t, const Operands& o) {
  check_row_length(o, 0);
  const uint32_t K = o.view(0).cols, flags = t.operand[5];
  o.matrix(0, SP_BF16, t.tile_end, K, "rows the tiles compute");
  o.array(1, {SP_BF16}, K, "elements of the input");
  if (o.present(2)) o.array(2, {SP_BF16}, K, "norm weights of the input");
  o.array(3, {SP_BF16, SP_F32}, t.tile_end, "rows the tiles write");
  if (o.present(4)) o.array(4, {SP_BF16}, t.tile_end, "residual rows the tiles read");
  if (flags & 0xFFFEu) refuse("operand 5 'flags' " + str(flags) + " sets bits 1..15, which mean nothing");
  if (!(flags & 1u)) return;
  if (!o.present(6)) refuse("operand 5 'flags' asks for an argmax partial, but operand 6 'argmax' names no view");
  o.array(6, {SP_U32}, 2 * (uint64_t(flags >> 16) + 1), "words up to the argmax slot in operand 5 'flags'");
}

void check_gate_up(const SpTask& t, const Operands& o) {
  check_row_length(o, 0);
  const uint32_t K = o.view(0).cols;
  o.matrix(0, SP_BF16, t.tile_end, K, "gate rows the tiles compute");
  o.matrix(1, SP_BF16, t.tile_end, K, "up rows the tiles compute");
  o.same_rows(1, 0);
  o.array(2, {SP_BF16}, K, "elements of the input");
  o.array(3, {SP_BF16}, K, "norm weights of the input");
  o.array(4, {SP_BF16}, t.tile_end, "rows the tiles write");
}

void check_attention(const Graph& g, const SpTask& t, const Operands& o) {
  const SpGraphParams& p = g.params;  // checked by graph_layout_problem
  const uint64_t Hq = p.n_heads, Hkv = p.n_kv_heads, D = p.head_dim, R = p.rotary_dim, ctx = p.context,
                 chunks = p.attn_chunks;
  if (t.tile_end > Hkv * chunks)
    refuse("its tiles end at " + str(t.tile_end) + ", past the " + str(Hkv * chunks) + " (kv head, chunk) tiles");
  o.array(0, {SP_BF16}, (Hq + 2 * Hkv) * D, "elements of the q, k and v heads");
  o.array(1, {SP_BF16}, D, "q norm weights");
  o.array(2, {SP_BF16}, D, "k norm weights");
  o.matrix(3, SP_BF16, 2 * Hkv * ctx, D, "K and V rows of every kv head and position");
  o.matrix(4, SP_BF16, ctx, R, "RoPE rows of every position");
  o.matrix(5, SP_F32, Hq * chunks, D + 2, "partial rows of every q head and chunk");
  if (o.view(5).cols != D + 2 || o.view(5).row_stride != D + 2)
    refuse("operand 5 'partials' has rows of " + str(o.view(5).cols) + " elements " + str(o.view(5).row_stride) +
           " apart, not " + str(D + 2) + " back to back: the CUDA merge stages whole rows");
  o.array(6, {SP_BF16}, Hq * D, "elements of the q heads' outputs");
  o.array(7, {SP_U32}, Hkv, "arrival words of the kv heads");
}

void check_sample(const Graph& g, const SpTask& t, const Operands& o) {
  const uint32_t count = t.operand[2];
  if (count == 0 || count > INT32_MAX)
    refuse("operand 2 'partial_count' " + str(count) + " is not between 1 and 2^31 - 1");
  o.array(0, {SP_F32}, g.params.vocab, "logits of the vocabulary");
  o.array(1, {SP_U32}, 2 * uint64_t(count), "words of operand 2's argmax partials");
  o.array(3, {SP_U32}, g.params.max_steps, "forced tokens of the graph's steps");
  o.array(4, {SP_U32}, g.params.max_steps, "out tokens of the graph's steps");
}

}  // namespace

std::string operand_bounds_problem(const Graph& g, size_t i) {
  const SpTask& t = g.tasks[i];
  const Operands o(g, t);
  try {
    o.check_written();
    switch (t.op) {
      case SP_OP_EMBED: check_embed(t, o); break;
      case SP_OP_GEMV: check_gemv(t, o); break;
      case SP_OP_GATE_UP: check_gate_up(t, o); break;
      case SP_OP_ATTENTION: check_attention(g, t, o); break;
      case SP_OP_SAMPLE: check_sample(g, t, o); break;
      case SP_OP_MLP:
        check_row_length(o, 0);
        check_row_length(o, 2);
        if (const char* problem = mlp_problem(t, g.views.data()))
          refuse(problem + (" (columns " + str(t.tile_begin) + ".." + str(t.tile_end) + ", gang of " +
                            str(sp_gang_width(t)) + ")"));
        break;
      case SP_OP_GEMV_PIECE:
        check_row_length(o, 0);
        if (const char* problem = gemv_piece_problem(t, g.views.data()))
          refuse(problem + (" (rows " + str(t.tile_begin) + ".." + str(t.tile_end) + ", piece " +
                            str(t.operand[6] & 0xFFFFu) + ")"));
        break;
      default: refuse("its opcode has no bounds to check");
    }
  } catch (const Refusal& r) {
    return r.why;
  }
  return "";
}

std::string graph_layout_problem(const Graph& g) {
  const SpGraphParams& p = g.params;
  const uint64_t Hq = p.n_heads, Hkv = p.n_kv_heads, D = p.head_dim, R = p.rotary_dim, ctx = p.context,
                 chunks = p.attn_chunks;
  if (Hkv == 0 || Hq == 0 || Hq % Hkv || Hq + 2 * Hkv > UINT32_MAX)
    return "the graph's " + str(Hq) + " q heads are not a whole number of groups of its " + str(Hkv) + " kv heads";
  if (D == 0 || D > kMaxHeadDim || R > D || R % 2)
    return "the graph's rotary dims " + str(R) + " are not an even number at most its head dim " + str(D) +
           " (at most " + str(kMaxHeadDim) + ")";
  if (ctx == 0 || chunks == 0 || chunks > kMaxAttnChunks || ctx + chunks > UINT32_MAX)
    return "the graph's context " + str(ctx) + " and attention chunks " + str(chunks) +
           " are not at least 1, the chunks at most " + str(kMaxAttnChunks) + ", with a sum below 2^32";
  if (g.arenas.size() < SP_ARENA_WEIGHTS0)
    return str(g.arenas.size()) + " arenas, fewer than the " + str(SP_ARENA_WEIGHTS0) + " fixed ones";
  if (g.arenas[SP_ARENA_STATE].bytes < SP_STATE_FORCED_OFFSET)
    return "arena 0 '" + g.arenas[SP_ARENA_STATE].name + "' has " + str(g.arenas[SP_ARENA_STATE].bytes) +
           " bytes, fewer than the step state's " + str(SP_STATE_FORCED_OFFSET);
  if (uint64_t(p.context) * p.rotary_dim * 2 > g.arenas[SP_ARENA_CONST].bytes)
    return "arena 3 '" + g.arenas[SP_ARENA_CONST].name + "' has " + str(g.arenas[SP_ARENA_CONST].bytes) +
           " bytes, fewer than the RoPE table's " + str(uint64_t(p.context) * p.rotary_dim * 2) + " (" +
           str(p.context) + " positions of " + str(p.rotary_dim) + " bf16)";
  if (p.norm_kind != SP_NORM_STANDARD && p.norm_kind != SP_NORM_ZERO_CENTRED)
    return "unknown norm kind " + str(p.norm_kind);
  if (!(std::isfinite(p.rms_eps) && p.rms_eps > 0)) return "rms_eps " + std::to_string(p.rms_eps) + " is not a positive number";
  if (p.rotary_dim && !(std::isfinite(p.rope_theta) && p.rope_theta > 0))
    return "rope_theta " + std::to_string(p.rope_theta) + " is not a positive number";
  const struct {
    const char* name;
    uint32_t view;
    SpDtype dtype;
    uint64_t elements;
    bool in_state;  // the host reads and writes it in its copy of the STATE arena
  } io[] = {{"logits", g.io.logits, SP_F32, p.vocab, false},
            {"forced_tokens", g.io.forced_tokens, SP_U32, p.max_steps, true},
            {"out_tokens", g.io.out_tokens, SP_U32, p.max_steps, true}};
  for (const auto& v : io) {
    const std::string name = std::string("io.") + v.name;
    if (v.view == SP_NO_VIEW) return name + " names no view";
    const SpView& view = g.views[v.view];
    if (view.dtype != v.dtype || elements(view) < v.elements)
      return name + " (view " + str(v.view) + " '" + g.view_names[v.view] + "') is " + str(elements(view)) + " " +
             dtype_name(view.dtype) + ", not at least " + str(v.elements) + " " + dtype_name(v.dtype);
    if (v.in_state && view.arena != SP_ARENA_STATE) return name + " is not in arena 0 (the step state's)";
    if (view.arena >= SP_ARENA_WEIGHTS0) return name + " lies in weight arena " + str(view.arena) + ", which is read-only";
  }
  return "";
}

}  // namespace spindle

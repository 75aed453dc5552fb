#include "tasks/operand_bounds.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "tasks/operand_check.h"

namespace spindle {
namespace {

// Attention's dimensions at most: beyond any model's (the config allows a head dim of 1024),
// and small enough that a head's shared memory (chunks x (head dim + 2) floats for the merge),
// counted in 32 bits, cannot wrap.
constexpr uint64_t kMaxHeadDim = 4096, kMaxAttnChunks = 1u << 16;

std::string str(uint64_t n) { return std::to_string(n); }

}  // namespace

void refuse(std::string why) { throw OperandRefusal{std::move(why)}; }

OperandCheck::OperandCheck(const Graph& g, const SpTask& t) : g_(g), t_(t), info_(opcode_operands(t.op)) {}

const SpOpParams& OperandCheck::params(uint32_t k) const {
  if (t_.operand[k] >= g_.op_params.size())
    refuse("operand " + str(k) + " '" + info_.operand[k].name + "' names op parameter record " + str(t_.operand[k]) +
           ", but the graph has " + str(g_.op_params.size()));
  return g_.op_params[t_.operand[k]];
}

void OperandCheck::array(uint32_t k, std::initializer_list<SpDtype> dtypes, uint64_t n, const char* what) const {
  dtype(k, dtypes);
  if (view_elements(view(k)) < n)
    refuse(name(k) + " holds " + str(view_elements(view(k))) + " elements, fewer than the " + str(n) + " " + what);
}

void OperandCheck::matrix(uint32_t k, SpDtype dt, uint64_t rows, uint64_t cols, const char* what) const {
  dtype(k, {dt});
  const SpView& v = view(k);
  if (v.rows < rows || v.cols < cols)
    refuse(name(k) + " is " + str(v.rows) + "x" + str(v.cols) + ", smaller than the " + str(rows) + "x" + str(cols) +
           " " + what);
}

void OperandCheck::row_length(uint32_t k) const {
  if (view(k).cols > kMaxRowLength)
    refuse("its rows of " + str(view(k).cols) + " columns are longer than the " + str(kMaxRowLength) +
           " a projection takes");
}

void OperandCheck::written_outside_weights() const {
  for (uint32_t k = 0; k < SP_TASK_OPERANDS; ++k)
    if (info_.operand[k].written && present(k) && view(k).arena >= SP_ARENA_WEIGHTS0)
      refuse(name(k) + " is written, but lies in weight arena " + str(view(k).arena));
}

void OperandCheck::same_rows(uint32_t k, uint32_t j) const {
  if (view(k).cols != view(j).cols || view(k).row_stride != view(j).row_stride)
    refuse(name(k) + " has " + str(view(k).cols) + " columns " + str(view(k).row_stride) + " apart, but " + name(j) +
           " " + str(view(j).cols) + " columns " + str(view(j).row_stride) + " apart: the op reads both with the latter's");
}

std::string OperandCheck::name(uint32_t k) const {
  return "operand " + str(k) + " '" + info_.operand[k].name + "' (view " + str(t_.operand[k]) + " '" +
         g_.view_names[t_.operand[k]] + "')";
}

void OperandCheck::dtype(uint32_t k, std::initializer_list<SpDtype> dtypes) const {
  for (SpDtype dt : dtypes)
    if (view(k).dtype == dt) return;
  std::string want;
  for (SpDtype dt : dtypes) want += (want.empty() ? "" : " or ") + std::string(sp_dtype_name(dt));
  refuse(name(k) + " is " + sp_dtype_name(view(k).dtype) + ", not " + want);
}

std::string operand_bounds_problem(const Graph& g, size_t i) {
  const SpTask& t = g.tasks[i];
  const OpDecl* decl = op_decl(t.op);
  if (!decl) return "its opcode has no declaration";
  const OperandCheck o(g, t);
  try {
    o.written_outside_weights();
    decl->check(g, t, o);
  } catch (const OperandRefusal& r) {
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
  if (p.attn_q_splits == 0 || (Hq / Hkv) % p.attn_q_splits)
    return "the graph's attention q-head splits " + str(p.attn_q_splits) + " do not divide a kv head's " +
           str(Hq / Hkv) + " q heads";
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
    if (view.dtype != v.dtype || view_elements(view) < v.elements)
      return name + " (view " + str(v.view) + " '" + g.view_names[v.view] + "') is " + str(view_elements(view)) + " " +
             sp_dtype_name(view.dtype) + ", not at least " + str(v.elements) + " " + sp_dtype_name(v.dtype);
    if (v.in_state && view.arena != SP_ARENA_STATE) return name + " is not in arena 0 (the step state's)";
    if (view.arena >= SP_ARENA_WEIGHTS0) return name + " lies in weight arena " + str(view.arena) + ", which is read-only";
  }
  return "";
}

}  // namespace spindle

#include "tasks/op_decls.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "tasks/gemv_piece.h"
#include "tasks/mlp_shape.h"
#include "tasks/op_params.h"
#include "tasks/operand_check.h"

namespace spindle {
namespace {

using K = OperandKind;

std::string str(uint64_t n) { return std::to_string(n); }

void check_embed(const Graph&, const SpTask& t, const OperandCheck& o) {
  o.matrix(0, SP_BF16, 1, t.tile_end, "columns the tiles copy");  // the token's row: checked when it runs
  o.array(1, {SP_BF16}, t.tile_end, "columns the tiles write");
}

void check_gemv(const Graph&, const SpTask& t, const OperandCheck& o) {
  o.row_length(0);
  const uint32_t K = o.view(0).cols, flags = t.operand[5];
  if (const char* problem = gemv_split_problem(t.operand[7], K))
    refuse(problem + (" (operand 7 'split' asks for " + str(t.operand[7] & 0xFFFFu) + " pieces in groups of " +
                      str(t.operand[7] >> 16) + "; the rows have " + str(K) + " columns)"));
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

void check_gate_up(const Graph&, const SpTask& t, const OperandCheck& o) {
  o.row_length(0);
  const uint32_t K = o.view(0).cols;
  o.matrix(0, SP_BF16, t.tile_end, K, "gate rows the tiles compute");
  o.matrix(1, SP_BF16, t.tile_end, K, "up rows the tiles compute");
  o.same_rows(1, 0);
  o.array(2, {SP_BF16}, K, "elements of the input");
  o.array(3, {SP_BF16}, K, "norm weights of the input");
  o.array(4, {SP_BF16}, t.tile_end, "rows the tiles write");
}

// ATTENTION's operands, or with `gated` GATED_ATTENTION's, whose q heads each hold their gate too.
void check_attention_operands(const Graph& g, const SpTask& t, const OperandCheck& o, bool gated) {
  const SpGraphParams& p = g.params;  // checked by graph_layout_problem
  const uint64_t Hq = p.n_heads, Hkv = p.n_kv_heads, D = p.head_dim, R = p.rotary_dim, ctx = p.context,
                 chunks = p.attn_chunks, units = Hkv * p.attn_q_splits;
  if (t.tile_end > units * chunks)
    refuse("its tiles end at " + str(t.tile_end) + ", past the " + str(units * chunks) +
           " (kv head, q-head split, chunk) tiles");
  o.array(0, {SP_BF16}, ((gated ? 2 : 1) * Hq + 2 * Hkv) * D,
          gated ? "elements of the q heads with their gates, the k and the v heads" : "elements of the q, k and v heads");
  o.array(1, {SP_BF16}, D, "q norm weights");
  o.array(2, {SP_BF16}, D, "k norm weights");
  o.matrix(3, SP_BF16, 2 * Hkv * ctx, D, "K and V rows of every kv head and position");
  o.matrix(4, SP_BF16, ctx, R, "RoPE rows of every position");
  o.matrix(5, SP_F32, Hq * chunks, D + 2, "partial rows of every q head and chunk");
  if (o.view(5).cols != D + 2 || o.view(5).row_stride != D + 2)
    refuse("operand 5 'partials' has rows of " + str(o.view(5).cols) + " elements " + str(o.view(5).row_stride) +
           " apart, not " + str(D + 2) + " back to back: the CUDA merge stages whole rows");
  o.array(6, {SP_BF16}, Hq * D, "elements of the q heads' outputs");
  o.array(7, {SP_U32}, units, "arrival words of the kv heads' q-head splits");
}

void check_attention(const Graph& g, const SpTask& t, const OperandCheck& o) { check_attention_operands(g, t, o, false); }
void check_gated_attention(const Graph& g, const SpTask& t, const OperandCheck& o) {
  check_attention_operands(g, t, o, true);
}

void check_gdn(const Graph&, const SpTask& t, const OperandCheck& o) {
  const SpView &conv = o.view(1), &state = o.view(6);
  const uint64_t C = conv.rows, Kc = conv.cols, Hv = o.view(2).cols, dv = o.view(4).cols, dk = state.cols;
  if (Kc == 0 || Kc > kMaxConvKernel)
    refuse(o.name(1) + " has " + str(Kc) + " taps a channel, not between 1 and " + str(kMaxConvKernel));
  if (Hv == 0 || dv == 0 || dk == 0 || dk > kMaxRowLength || dv > kMaxRowLength)
    refuse("its value heads (" + str(Hv) + ", operand 2), value head size (" + str(dv) + ", operand 4) or key head size (" +
           str(dk) + ", operand 6) is 0 or more than " + str(kMaxRowLength));
  if (C <= Hv * dv || (C - Hv * dv) % (2 * dk))
    refuse(o.name(1) + "'s " + str(C) + " channels are not the value heads' " + str(Hv * dv) +
           " and a whole number of q and k heads of " + str(dk));
  const uint64_t Hk = (C - Hv * dv) / (2 * dk);
  if (Hv % Hk) refuse("its " + str(Hv) + " value heads are not a whole number of each of its " + str(Hk) + " key heads'");
  const uint64_t len = t.tile_end - t.tile_begin, w = sp_gang_width(t);
  if (t.tile_end > Hv * dv)
    refuse("its tiles end at " + str(t.tile_end) + ", past the " + str(Hv * dv) + " state rows of the value heads");
  if (w == 1 && (t.tile_begin % dv || t.tile_end % dv))
    refuse("its state rows " + str(t.tile_begin) + ".." + str(t.tile_end) + " are not whole value heads of " + str(dv));
  if (w > 1 && (len * w != dv || t.tile_begin < t.gang_rank * len || (t.tile_begin - t.gang_rank * len) % dv))
    refuse("its gang of " + str(w) + " does not share one value head's " + str(dv) + " state rows (rank " +
           str(t.gang_rank) + ", rows " + str(t.tile_begin) + ".." + str(t.tile_end) + ")");
  o.array(0, {SP_BF16}, C + 2 * Hv * dv + 2 * Hv, "elements of the channels, z, b, a and the gangs' exchange");
  o.array(3, {SP_BF16}, Hv, "dt_bias of every value head");
  o.matrix(5, SP_BF16, C, Kc, "conv inputs of every channel");
  o.matrix(6, SP_F32, Hv * dv, dk, "state rows of every value head");
  if (state.row_stride != dk)
    refuse(o.name(6) + " has rows " + str(state.row_stride) + " elements apart, not " + str(dk) + ": back to back");
  o.array(7, {SP_BF16}, Hv * dv, "outputs of every value head");
}

void check_sample(const Graph& g, const SpTask& t, const OperandCheck& o) {
  const uint32_t count = t.operand[2];
  if (count == 0 || count > INT32_MAX)
    refuse("operand 2 'partial_count' " + str(count) + " is not between 1 and 2^31 - 1");
  o.array(0, {SP_F32}, g.params.vocab, "logits of the vocabulary");
  o.array(1, {SP_U32}, 2 * uint64_t(count), "words of operand 2's argmax partials");
  o.array(3, {SP_U32}, g.params.max_steps, "forced tokens of the graph's steps");
  o.array(4, {SP_U32}, g.params.max_steps, "out tokens of the graph's steps");
}

void check_mlp(const Graph& g, const SpTask& t, const OperandCheck& o) {
  o.row_length(0);
  o.row_length(2);
  if (const char* problem = mlp_problem(t, g.views.data()))
    refuse(problem + (" (columns " + str(t.tile_begin) + ".." + str(t.tile_end) + ", gang of " +
                      str(sp_gang_width(t)) + ")"));
}

void check_gemv_piece(const Graph& g, const SpTask& t, const OperandCheck& o) {
  o.row_length(0);
  if (const char* problem = gemv_piece_problem(t, g.views.data()))
    refuse(problem + (" (rows " + str(t.tile_begin) + ".." + str(t.tile_end) + ", piece " +
                      str(t.operand[6] & 0xFFFFu) + ")"));
}

void check_piece_dots(const Graph&, const SpTask& t, const OperandCheck& o) {
  o.row_length(0);
  const uint32_t P = o.view(0).cols, j = t.operand[3];
  if (P % 8u) refuse("the piece has " + str(P) + " columns, not whole octets (a multiple of 8), as a split's pieces are");
  o.matrix(0, SP_BF16, t.tile_end, P, "rows the tiles compute");
  o.array(1, {SP_BF16}, P, "elements of the piece's input");
  o.matrix(2, SP_F32, uint64_t(j) + 1, t.tile_end, "partial rows up to the piece's, as wide as the rows");
}

// The split whose pieces a sum task (PIECE_SUM, EXPERT_DOWN_SUM) adds, from its operand k: at
// least `least` pieces.
GemvSplit summed_split(const SpTask& t, uint32_t k, uint32_t least) {
  const GemvSplit s = gemv_split(t.operand[k]);
  const std::string operand = "operand " + str(k) + " 'split'";
  if (s.pieces < least) refuse(operand + " has fewer than " + str(least) + " pieces: there is nothing to sum");
  if (s.pieces % s.group) refuse(operand + ": its groups do not divide its pieces");
  return s;
}

void check_piece_sum(const Graph&, const SpTask& t, const OperandCheck& o) {
  const GemvSplit s = summed_split(t, 3, 2);
  o.matrix(0, SP_F32, s.pieces, t.tile_end, "partial rows of every piece, as wide as the rows");
  o.array(1, {SP_BF16}, t.tile_end, "rows the tiles write");
  if (o.present(2)) o.array(2, {SP_BF16}, t.tile_end, "residual rows the tiles read");
}

// Experts at most a layer: more than any released model's (512), and few enough that the
// router's softmax and top k fit one tile's shared memory on every executor.
constexpr uint32_t kMaxExperts = 4096;

// The MoE record operand k names, checked: 1 <= k slots <= E <= kMaxExperts, and the expert
// rows not 0, so every routed read below is inside the fused views checked against them. Held
// experts other than all (expert parallel) only where `holds` (EXPERT_GATE_UP and
// EXPERT_DOWN_PIECE skip the others' slots) and in a graph over several devices (a device's
// share; the GPU executors, which run one device, compute every slot).
const SpMoeParams& moe_params(const Graph& g, const OperandCheck& o, uint32_t k, bool holds = false) {
  const SpMoeParams& p = sp_op_record<SpMoeParams>(o.params(k));
  if (p.experts == 0 || p.experts > kMaxExperts || p.slots == 0 || p.slots > p.experts)
    refuse("its MoE parameters choose " + str(p.slots) + " of " + str(p.experts) +
           " experts, not between 1 and the experts, at most " + str(kMaxExperts));
  if (p.expert_rows == 0) refuse("its MoE parameters give experts of 0 rows");
  if (p.flags & ~SP_MOE_NORMALISE) refuse("its MoE parameters set flags " + str(p.flags) + ", which mean nothing");
  if (p.held_count == 0) return p;
  const std::string held = "its MoE parameters hold experts " + str(p.held_first) + ".." +
                           str(uint64_t(p.held_first) + p.held_count);
  if (!holds) refuse(held + ": only expert_gate_up and expert_down_piece tasks skip other devices' experts");
  if (p.held_first > p.experts || p.held_count > p.experts - p.held_first)
    refuse(held + ", past the " + str(p.experts) + " experts");
  if (g.devices < 2) refuse(held + " in a graph of one device, which must compute every expert's slots");
  return p;
}

void check_router(const Graph& g, const SpTask& t, const OperandCheck& o) {
  const SpMoeParams& p = moe_params(g, o, 4);
  o.row_length(0);
  const uint32_t H = o.view(0).cols;
  o.matrix(0, SP_BF16, p.experts, H, "rows of every expert");
  if (t.tile_end > p.experts) refuse("its tiles end at " + str(t.tile_end) + ", past the " + str(p.experts) + " experts");
  o.array(1, {SP_BF16}, H, "elements of the input");
  o.array(2, {SP_BF16}, H, "norm weights of the input");
  o.array(3, {SP_F32}, p.experts, "logits of every expert");
}

void check_expert_gate_up(const Graph& g, const SpTask& t, const OperandCheck& o) {
  const SpMoeParams& p = moe_params(g, o, 5, true);
  o.row_length(0);
  const uint32_t H = o.view(0).cols;
  o.matrix(0, SP_BF16, 2 * uint64_t(p.experts) * p.expert_rows, H, "gate and up rows of every expert");
  if (t.tile_end > uint64_t(p.slots) * p.expert_rows)
    refuse("its tiles end at " + str(t.tile_end) + ", past the " + str(uint64_t(p.slots) * p.expert_rows) +
           " rows of the " + str(p.slots) + " slots");
  o.array(1, {SP_BF16}, H, "elements of the input");
  o.array(2, {SP_BF16}, H, "norm weights of the input");
  o.array(3, {SP_U32}, 2 * uint64_t(p.slots), "words of the slots' {expert, weight}");
  o.matrix(4, SP_BF16, p.slots, p.expert_rows, "activations of every slot");
  o.array(6, {SP_F32}, p.experts, "router logits of every expert");
}

void check_expert_down(const Graph& g, const SpTask& t, const OperandCheck& o) {
  const SpMoeParams& p = moe_params(g, o, 4);
  o.row_length(0);
  const SpView& W = o.view(0);
  if (W.cols != p.expert_rows)
    refuse(o.name(0) + " has rows of " + str(W.cols) + " columns, not the experts' " + str(p.expert_rows));
  if (W.rows % p.experts) refuse(o.name(0) + "'s " + str(W.rows) + " rows are not " + str(p.experts) + " experts'");
  const uint64_t H = W.rows / p.experts;
  if (t.tile_end > H) refuse("its tiles end at " + str(t.tile_end) + ", past an expert's " + str(H) + " rows");
  o.matrix(1, SP_BF16, p.slots, p.expert_rows, "activations of every slot");
  o.array(2, {SP_U32}, 2 * uint64_t(p.slots), "words of the slots' {expert, weight}");
  o.array(3, {SP_BF16}, t.tile_end, "hidden rows the tiles add to");
}

// The shared expert's operands of EXPERT_DOWN_SHARED and EXPERT_DOWN_SUM: 5 its down rows, 6 its
// activations, 7 its gate's logit.
void check_shared_expert(const SpTask& t, const OperandCheck& o) {
  o.row_length(5);
  const SpView& Wd = o.view(5);
  o.matrix(5, SP_BF16, t.tile_end, Wd.cols, "shared expert rows the tiles compute");
  o.array(6, {SP_BF16}, Wd.cols, "activations of the shared expert");
  o.array(7, {SP_BF16}, 1, "shared expert gate logit");
}

void check_expert_down_shared(const Graph& g, const SpTask& t, const OperandCheck& o) {
  check_expert_down(g, t, o);
  check_shared_expert(t, o);
}

void check_expert_down_piece(const Graph& g, const SpTask& t, const OperandCheck& o) {
  const SpMoeParams& p = moe_params(g, o, 4, true);
  o.row_length(0);
  const SpView& W = o.view(0);
  const uint32_t P = W.cols;
  if (P % 8u) refuse("the piece has " + str(P) + " columns, not whole octets (a multiple of 8), as a split's pieces are");
  if (P > p.expert_rows) refuse("the piece has " + str(P) + " columns, more than the experts' " + str(p.expert_rows));
  if (W.rows % p.experts) refuse(o.name(0) + "'s " + str(W.rows) + " rows are not " + str(p.experts) + " experts'");
  const uint64_t H = W.rows / p.experts;
  if (t.tile_end > H) refuse("its tiles end at " + str(t.tile_end) + ", past an expert's " + str(H) + " rows");
  o.matrix(1, SP_BF16, p.slots, P, "piece columns of every slot's activations");
  o.array(2, {SP_F32}, p.experts, "router logits of every expert");
  o.matrix(3, SP_F32, uint64_t(t.operand[5]) + 1, p.slots * H, "partial rows up to the piece's, a row of every slot");
}

void check_expert_down_sum(const Graph& g, const SpTask& t, const OperandCheck& o) {
  const SpMoeParams& p = moe_params(g, o, 3);
  const GemvSplit s = summed_split(t, 4, 1);  // 1: the slots' rows exchanged whole
  const SpView& partials = o.view(0);
  if (partials.cols % p.slots) refuse(o.name(0) + "'s rows are not " + str(p.slots) + " slots' rows alike");
  o.matrix(0, SP_F32, s.pieces, uint64_t(p.slots) * t.tile_end, "partial rows of every piece, a row of every slot");
  if (partials.cols / p.slots < t.tile_end)
    refuse("its tiles end at " + str(t.tile_end) + ", past the " + str(partials.cols / p.slots) + " rows a slot has");
  o.array(1, {SP_F32}, p.experts, "router logits of every expert");
  o.array(2, {SP_BF16}, t.tile_end, "hidden rows the tiles add to");
  if (!o.present(5)) {
    if (o.present(6) || o.present(7)) refuse("a shared expert's activations or gate without its down rows (operand 5)");
    return;
  }
  if (o.view(5).dtype == SP_F32) {  // the shared expert's down dots in pieces, split as shared_pieces_split says
    const GemvSplit shared = shared_pieces_split(t.operand[4], p);
    const std::string split = "the shared expert's down dots' split (its MoE parameters' shared_split, else operand 4)";
    if (shared.pieces < 2) refuse(split + " has fewer than 2 pieces: there is nothing to sum");
    if (shared.pieces % shared.group) refuse(split + ": its groups do not divide its pieces");
    o.matrix(5, SP_F32, shared.pieces, t.tile_end, "shared expert partial rows of every piece");
    if (o.present(6)) refuse("the shared expert's activations beside its down dots' pieces, which hold them already");
    if (!o.present(7)) refuse("the shared expert's down dots' pieces without its gate (operand 7)");
    o.array(7, {SP_BF16}, 1, "shared expert gate logit");
    return;
  }
  if (!o.present(6) || !o.present(7)) refuse("the shared expert's down rows without its activations and gate");
  check_shared_expert(t, o);
}

uint64_t tiles(const SpTask& t) { return t.tile_end - t.tile_begin; }

// The MoE record that operand k names (checked by moe_params).
const SpMoeParams& moe_record(const Graph& g, const SpTask& t, uint32_t k) {
  return sp_op_record<SpMoeParams>(g.op_params[t.operand[k]]);
}

// A task's routed bytes when it computes every slot, times the share of the experts it holds
// (expert parallel: the bytes it reads when the routing spreads evenly over the experts, so
// that the devices' tasks of a stage add up to every slot's).
uint64_t held_share(const SpMoeParams& p, uint64_t every_slot) {
  return p.held_count ? every_slot * p.held_count / p.experts : every_slot;
}

uint64_t expert_gate_up_bytes(const Graph& g, const SpTask& t) {
  return held_share(moe_record(g, t, 5), 2 * tiles(t) * g.views[t.operand[0]].cols * sizeof(uint16_t));
}

// The slots' rows of its tiles (EXPERT_DOWN_PIECE's W view is its piece's columns).
uint64_t expert_down_bytes(const Graph& g, const SpTask& t) {
  const SpMoeParams& p = moe_record(g, t, 4);
  return held_share(p, tiles(t) * p.slots * g.views[t.operand[0]].cols * sizeof(uint16_t));
}

// A projection stages its (normed) input: the columns of its first operand.
uint64_t row_input(const Graph& g, const SpTask& t) { return g.views[t.operand[0]].cols; }
// An MLP member stages the normed hidden state and its activations.
uint64_t mlp_input(const Graph& g, const SpTask& t) { return g.views[t.operand[2]].rows + tiles(t); }
// The MoE tiles also stage 32-bit words, each in the room of two elements, after rows staged
// in whole octets (8 elements).
uint64_t octets(uint64_t elements) { return (elements + 7) / 8 * 8; }
// The routed experts' gate and up rows: the normed input, then the router's E logits and the k
// experts it routes to (the shaders' route_experts), words in the room of two elements.
uint64_t expert_gate_up_input(const Graph& g, const SpTask& t) {
  const SpMoeParams& p = moe_record(g, t, 5);
  return octets(row_input(g, t)) + 2 * (uint64_t(p.experts) + p.slots);
}
// Their down rows: the k slots' activation rows, then the slots.
uint64_t expert_down_input(const Graph& g, const SpTask& t) {
  const SpMoeParams& p = moe_record(g, t, 4);
  return p.slots * (octets(p.expert_rows) + 4);
}
// EXPERT_DOWN_SHARED's: EXPERT_DOWN's slot rows, the shared expert's activations, the slots.
uint64_t expert_down_shared_input(const Graph& g, const SpTask& t) {
  return expert_down_input(g, t) + octets(g.views[t.operand[5]].cols);
}
// EXPERT_DOWN_PIECE's: the k slots' activation rows of its piece, then the router's E logits and
// the k experts it routes to.
uint64_t expert_down_piece_input(const Graph& g, const SpTask& t) {
  const SpMoeParams& p = moe_record(g, t, 4);
  return p.slots * octets(g.views[t.operand[0]].cols) + 2 * (uint64_t(p.experts) + p.slots);
}
// EXPERT_DOWN_SUM's: the shared expert's activations where it reads its rows, then the E logits,
// the k experts and their k weights.
uint64_t expert_down_sum_input(const Graph& g, const SpTask& t) {
  const SpMoeParams& p = moe_record(g, t, 3);
  const bool rows = t.operand[5] != SP_NO_VIEW && g.views[t.operand[5]].dtype == SP_BF16;
  return (rows ? octets(g.views[t.operand[5]].cols) : 0) + 2 * (uint64_t(p.experts) + 2 * p.slots);
}
// GDN's: a value head's q, k and v (its conv's outputs) and its output o, as f32 words.
uint64_t gdn_input(const Graph& g, const SpTask& t) {
  const uint64_t dk = g.views[t.operand[6]].cols, dv = g.views[t.operand[4]].cols;
  return 2 * (2 * dk + 2 * dv);
}
uint64_t none(const Graph&, const SpTask&) { return 0; }

// The task's tiles are rows of operand 0 (GEMV, ROUTER, GEMV_PIECE, PIECE_DOTS), or of 0 and 1
// (GATE_UP).
void tile_rows_of_0(const Graph&, const SpTask& t, const WeightRowsSink& add) { add(0, t.tile_begin, t.tile_end); }
void tile_rows_of_0_1(const Graph&, const SpTask& t, const WeightRowsSink& add) {
  add(0, t.tile_begin, t.tile_end);
  add(1, t.tile_begin, t.tile_end);
}

// The experts whose rows a routed task may read: those its params hold.
template <class F>
void for_each_held_expert(const SpMoeParams& p, F&& f) {
  const uint32_t first = p.held_count ? p.held_first : 0, end = p.held_count ? p.held_first + p.held_count : p.experts;
  for (uint32_t e = first; e < end; ++e) f(e);
}

// EXPERT_GATE_UP: tile t is row t % Im of a slot, so of every held expert's gate (rows e·2Im +
// r) and up rows (e·2Im + Im + r), the rows r the tiles cover: every row once they span Im.
void expert_gate_up_rows(const Graph& g, const SpTask& t, const WeightRowsSink& add) {
  const SpMoeParams& p = moe_record(g, t, 5);
  const uint64_t Im = p.expert_rows, r0 = t.tile_begin % Im, r1 = r0 + (t.tile_end - t.tile_begin);
  for_each_held_expert(p, [&](uint32_t e) {
    for (const uint64_t base : {2 * Im * e, 2 * Im * e + Im}) {
      if (r1 - r0 >= Im) add(0, base, base + Im);
      else if (r1 <= Im) add(0, base + r0, base + r1);
      else {  // the tiles wrap into the next slot's first rows
        add(0, base + r0, base + Im);
        add(0, base, base + r1 - Im);
      }
    }
  });
}

// The experts' down (EXPERT_DOWN, EXPERT_DOWN_SHARED, EXPERT_DOWN_PIECE): tile r is row r of
// every held expert's H rows (rows e·H + r); with a shared expert in bf16 (operand 5), its
// rows r.
void expert_down_rows(const Graph& g, const SpTask& t, const WeightRowsSink& add) {
  const SpMoeParams& p = moe_record(g, t, 4);
  const uint64_t H = g.views[t.operand[0]].rows / p.experts;
  for_each_held_expert(p, [&](uint32_t e) { add(0, e * H + t.tile_begin, e * H + t.tile_end); });
  if (t.op == SP_OP_EXPERT_DOWN_SHARED) add(5, t.tile_begin, t.tile_end);
}

// EXPERT_DOWN_SUM: the shared expert's down rows, where it reads them (operand 5 in bf16).
void expert_down_sum_rows(const Graph&, const SpTask& t, const WeightRowsSink& add) {
  if (t.operand[5] != SP_NO_VIEW) add(5, t.tile_begin, t.tile_end);
}

const OpDecl kEmbed{{{{K::View, "table"}, {K::View, "out", true}}}, check_embed, nullptr, none, nullptr};
const OpDecl kGemv{{{{K::View, "W"}, {K::View, "x"}, {K::OptionalView, "norm"}, {K::View, "out", true},
                     {K::OptionalView, "residual"}, {K::Immediate, "flags"}, {K::OptionalView, "argmax", true},
                     {K::Split, "split"}}},
                   check_gemv, nullptr, row_input, tile_rows_of_0};
const OpDecl kGateUp{{{{K::View, "Wg"}, {K::View, "Wu"}, {K::View, "x"}, {K::View, "norm"}, {K::View, "out", true}}},
                     check_gate_up, nullptr, row_input, tile_rows_of_0_1};
const OpDecl kAttention{{{{K::View, "qkv"}, {K::View, "q_norm"}, {K::View, "k_norm"}, {K::View, "kv_cache", true},
                          {K::View, "rope"}, {K::View, "partials", true}, {K::View, "out", true},
                          {K::View, "arrivals", true}}},
                        check_attention, nullptr, none, nullptr};
const OpDecl kExpertDownShared{{{{K::View, "W", false, true}, {K::View, "act"}, {K::View, "routing"},
                                 {K::View, "hidden", true}, {K::Params, "params"}, {K::View, "shared_W"},
                                 {K::View, "shared_act"}, {K::View, "shared_gate"}}},
                               check_expert_down_shared, expert_down_bytes, expert_down_shared_input,
                               expert_down_rows};
const OpDecl kGatedAttention{kAttention.operands, check_gated_attention, nullptr, none, nullptr};
const OpDecl kGdn{{{{K::View, "proj", true}, {K::View, "conv_w"}, {K::View, "A_log"}, {K::View, "dt_bias"}, {K::View, "norm"},
                    {K::View, "conv_state", true}, {K::View, "state", true}, {K::View, "out", true}}},
                  check_gdn, nullptr, gdn_input, nullptr};
const OpDecl kSample{{{{K::View, "logits"}, {K::View, "argmax"}, {K::Immediate, "partial_count"},
                       {K::View, "forced"}, {K::View, "out_tokens", true}}},
                     check_sample, nullptr, none, nullptr};
const OpDecl kMlp{{{{K::View, "Wg"}, {K::View, "Wu"}, {K::View, "Wd"}, {K::View, "hidden", true}, {K::View, "norm"},
                    {K::View, "partials", true}, {K::View, "arrivals", true}}},
                  check_mlp, nullptr, mlp_input, nullptr};
const OpDecl kGemvPiece{{{{K::View, "W"}, {K::View, "x"}, {K::View, "out", true}, {K::OptionalView, "residual"},
                          {K::View, "partials", true}, {K::View, "arrivals", true}, {K::Immediate, "piece"},
                          {K::Split, "split"}}},
                        check_gemv_piece, nullptr, row_input, tile_rows_of_0};
const OpDecl kRouter{{{{K::View, "W"}, {K::View, "x"}, {K::View, "norm"}, {K::View, "logits", true},
                       {K::Params, "params"}}},
                     check_router, nullptr, row_input, tile_rows_of_0};
const OpDecl kExpertGateUp{{{{K::View, "W", false, true}, {K::View, "x"}, {K::View, "norm"}, {K::View, "routing", true},
                             {K::View, "act", true}, {K::Params, "params"}, {K::View, "logits"}}},
                           check_expert_gate_up, expert_gate_up_bytes, expert_gate_up_input,
                           expert_gate_up_rows};
const OpDecl kExpertDown{{{{K::View, "W", false, true}, {K::View, "act"}, {K::View, "routing"},
                           {K::View, "hidden", true}, {K::Params, "params"}}},
                         check_expert_down, expert_down_bytes, expert_down_input, expert_down_rows};
const OpDecl kPieceDots{{{{K::View, "W"}, {K::View, "x"}, {K::View, "partials", true}, {K::Immediate, "piece"}}},
                        check_piece_dots, nullptr, row_input, tile_rows_of_0};
const OpDecl kPieceSum{{{{K::View, "partials"}, {K::View, "out", true}, {K::OptionalView, "residual"},
                         {K::Split, "split"}}},
                       check_piece_sum, nullptr, none, nullptr};
const OpDecl kExpertDownPiece{{{{K::View, "W", false, true}, {K::View, "act"}, {K::View, "logits"},
                                 {K::View, "partials", true}, {K::Params, "params"}, {K::Immediate, "piece"}}},
                               check_expert_down_piece, expert_down_bytes, expert_down_piece_input, expert_down_rows};
const OpDecl kExpertDownSum{{{{K::View, "partials"}, {K::View, "logits"}, {K::View, "hidden", true}, {K::Params, "params"},
                              {K::Split, "split"}, {K::OptionalView, "shared_W"}, {K::OptionalView, "shared_act"},
                              {K::OptionalView, "shared_gate"}}},
                            check_expert_down_sum, nullptr, expert_down_sum_input, expert_down_sum_rows};

}  // namespace

const OpDecl* op_decl(uint32_t op) {
  switch (op) {
    case SP_OP_EMBED: return &kEmbed;
    case SP_OP_GEMV: return &kGemv;
    case SP_OP_GATE_UP: return &kGateUp;
    case SP_OP_ATTENTION: return &kAttention;
    case SP_OP_SAMPLE: return &kSample;
    case SP_OP_MLP: return &kMlp;
    case SP_OP_GEMV_PIECE: return &kGemvPiece;
    case SP_OP_ROUTER: return &kRouter;
    case SP_OP_EXPERT_GATE_UP: return &kExpertGateUp;
    case SP_OP_EXPERT_DOWN: return &kExpertDown;
    case SP_OP_GATED_ATTENTION: return &kGatedAttention;
    case SP_OP_GDN: return &kGdn;
    case SP_OP_EXPERT_DOWN_SHARED: return &kExpertDownShared;
    case SP_OP_PIECE_DOTS: return &kPieceDots;
    case SP_OP_PIECE_SUM: return &kPieceSum;
    case SP_OP_EXPERT_DOWN_PIECE: return &kExpertDownPiece;
    case SP_OP_EXPERT_DOWN_SUM: return &kExpertDownSum;
    default: return nullptr;
  }
}

}  // namespace spindle

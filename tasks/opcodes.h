// Opcodes and the meaning of each one's operand words. Operand words name views (see
// view.h) unless marked "imm" or "params" (an index into the graph's op parameter records,
// op_params.h). Tiles are the unit a task's [tile_begin, tile_end) counts. Every op is listed
// once in SP_OPS below; tasks/op_decls.h declares the rest of what executors know of it.
#pragma once
#include <stdint.h>

#include "tasks/host_device.h"

// Which executors have a tile for an op (the last column of SP_OPS): their capability checks
// and dispatch switches follow from it.
#define SP_ON_CPU 1u             // sequential, fp64 and threaded (ops/run_task.h)
#define SP_ON_CUDA_PLAIN 2u      // the persistent kernel's plain build (megakernel/run_device_task.cuh)
#define SP_ON_CUDA_TWO_HOP 4u    // its two-hop build
#define SP_ON_CUDA_PER_OP 8u     // the per-op kernels and the CUDA graph of them
#define SP_ON_VULKAN 16u         // the compute shader (shaders/op_*.glsl)
#define SP_ON_CUDA_MOE 32u       // the persistent kernel's MoE build (megakernel/tile_build.h)
#define SP_ON_ALL 63u
// Every executor but the persistent kernel's plain and MoE builds, which stay lean: a tile in a
// build weighs on every task's code (the MoE tiles made qwen3-8b's megakernel 6.6% slower). A
// graph with such an op runs in the two-hop build.
#define SP_ON_ALL_BUT_PLAIN (SP_ON_CPU | SP_ON_CUDA_TWO_HOP | SP_ON_CUDA_PER_OP | SP_ON_VULKAN)
// The routed experts' ops are in the MoE build as well (the plain build's tiles but GATE_UP, and
// theirs); the dense MLP's GATE_UP is not: no qwen3_moe graph whose every layer is routed has
// one, and one with dense layers runs in the two-hop build.
#define SP_ON_ALL_BUT_PLAIN_WITH_MOE (SP_ON_ALL_BUT_PLAIN | SP_ON_CUDA_MOE)
#define SP_ON_ALL_BUT_MOE (SP_ON_ALL & ~SP_ON_CUDA_MOE)
// The ops of a step split over devices (and of their one-device numerics): every executor but
// the persistent kernel, whose two-hop build they made spill more (docs/multi-device.md).
#define SP_ON_ALL_BUT_PERSISTENT (SP_ON_CPU | SP_ON_CUDA_PER_OP | SP_ON_VULKAN)

// X(NAME, name, value, executors): every opcode. `name` is the op's name in dumps, traces and
// errors, and the suffix of its tile functions (run_<name>, and cost_<name> in GLSL).
#define SP_OPS(X)                                                     \
  X(EMBED, embed, 1, SP_ON_ALL)                                       \
  X(GEMV, gemv, 2, SP_ON_ALL)                                         \
  X(GATE_UP, gate_up, 3, SP_ON_ALL_BUT_MOE)                           \
  X(ATTENTION, attention, 4, SP_ON_ALL)                               \
  X(SAMPLE, sample, 5, SP_ON_ALL)                                     \
  X(MLP, mlp, 6, SP_ON_ALL_BUT_PLAIN)                                 \
  X(GEMV_PIECE, gemv_piece, 7, SP_ON_ALL_BUT_PLAIN)                   \
  X(ROUTER, router, 8, SP_ON_ALL_BUT_PLAIN_WITH_MOE)                   \
  X(EXPERT_GATE_UP, expert_gate_up, 9, SP_ON_ALL_BUT_PLAIN_WITH_MOE)   \
  X(EXPERT_DOWN, expert_down, 10, SP_ON_ALL_BUT_PLAIN_WITH_MOE)        \
  X(GATED_ATTENTION, gated_attention, 11, SP_ON_ALL_BUT_PLAIN)        \
  X(GDN, gdn, 12, SP_ON_ALL_BUT_PLAIN)                                \
  X(EXPERT_DOWN_SHARED, expert_down_shared, 13, SP_ON_ALL_BUT_PLAIN)  \
  X(PIECE_DOTS, piece_dots, 14, SP_ON_ALL_BUT_PERSISTENT)           \
  X(PIECE_SUM, piece_sum, 15, SP_ON_ALL_BUT_PERSISTENT)             \
  X(EXPERT_DOWN_PIECE, expert_down_piece, 16, SP_ON_ALL_BUT_PERSISTENT) \
  X(EXPERT_DOWN_SUM, expert_down_sum, 17, SP_ON_ALL_BUT_PERSISTENT)

enum SpOpcode : uint32_t {
  // Copy row `token` of the embedding table into the hidden state. Tiles: columns.
  //   0 table [V,H] bf16   1 out [H] bf16
  SP_OP_EMBED = 1,
  // y[r] = W[r,:] · normed(x), optionally plus a residual. Tiles: output rows.
  //   0 W [rows,K] bf16   1 x [K] bf16   2 norm weight [K] bf16 or SP_NO_VIEW (no norm)
  //   3 out [rows]: bf16, or f32 holding bf16-rounded values (logits)
  //   4 residual [rows] bf16 or SP_NO_VIEW: out = bf16(res + bf16(W·x)); may alias out
  //   5 imm flags: bit 0 write argmax partial; bits 16..31 its slot
  //   6 argmax partials [slots] of {f32 value, u32 index} or SP_NO_VIEW
  //   7 imm split: bits 0..15 pieces S, bits 16..31 pieces a group G; 0 = none. Each row's dot
  //     is then the sum of S dots over K/S columns each, added G at a time (ops/gemv.h
  //     split_row_dot, docs/numerics.md): what a layer whose rows are split over blocks sums
  SP_OP_GEMV = 2,
  // act[r] = bf16(bf16(silu(bf16(Wg[r]·n))) * bf16(Wu[r]·n)), n = normed(x). Tiles: rows.
  //   0 Wg [I,K] bf16   1 Wu [I,K] bf16   2 x [K] bf16   3 norm weight [K] bf16   4 out [I] bf16
  SP_OP_GATE_UP = 3,
  // Attention of the step's position p over the positions 0..p, split into `attn_chunks`
  // chunks (ops/attention.h chunk_positions), for one kv head g and a part of its group's q
  // heads: the group split into `attn_q_splits` equal parts, unit u = g * attn_q_splits + split
  // holding q heads u*G' .. u*G' + G' - 1 (G' = group / attn_q_splits). The tile normalises
  // (RMSNorm over head_dim) and rotates (RoPE at p) its q heads; a tile whose chunk holds p
  // also normalises and rotates k, scores position p against that k̂ and the raw v (never the
  // caches' row p), and in split 0 appends k̂ and v at row p of the caches (over more devices
  // than kv heads, in the first split of each device's share: attn_kv_share). Each tile writes
  // online-softmax partials; the unit's last tile to finish in the step (counted in the
  // arrivals word of u, which it resets to 0) merges them in chunk order into out.
  // Tiles: unit * attn_chunks + chunk.
  //   0 qkv [(Hq+2Hkv)*D] bf16 (q heads, k heads, v heads)   1 q_norm [D]   2 k_norm [D]
  //   3 KV cache [2*Hkv*ctx, D] bf16: K row g*ctx + t, V row (Hkv+g)*ctx + t
  //   4 rope table [ctx, R] bf16   5 partials [Hq*chunks, D+2] f32 {m, l, acc[D]}
  //   6 out [Hq*D] bf16   7 arrivals [Hkv*attn_q_splits] u32, zero between steps
  SP_OP_ATTENTION = 4,
  // Choose the next token from the logits (greedy from the argmax partials when the step
  // state's temperature is 0, else seeded temperature/top-k/top-p sampling), record it and
  // advance the step state, noting there a step whose logits were not all finite (the argmax
  // partials' NaN mark, ops/argmax.h). One tile.
  //   0 logits [V] f32   1 argmax partials   2 imm partial count
  //   3 forced tokens [max_steps] u32   4 out tokens [max_steps] u32
  SP_OP_SAMPLE = 5,
  // The MLP of one piece of P = tile_end - tile_begin intermediate columns, run by a gang
  // (tasks/gang.h) of w = gang width members, pieces j = tile_begin / P: in phase 0 each member
  // computes its P activations as GATE_UP does (normed hidden) and down's dots over their P
  // columns into partial row j; in phase 1 member r sums its gang's w partial rows over its
  // share of the H rows (gang_rows) into row pieces + gang, and the last of the gangs to do so
  // for share r (the arrivals word r, which it resets) sums the gangs' rows in order and adds
  // them to hidden: bit for bit a GEMV down split pieces/w (ops/mlp.h, docs/numerics.md).
  // Tiles: intermediate columns.
  //   0 Wg [I,H] bf16   1 Wu [I,H] bf16   2 Wd [H,I] bf16
  //   3 hidden [H] bf16: the input, and in place the output r(hidden + r(down · act))
  //   4 norm weight [H] bf16   5 partials [pieces + gangs, H] f32   6 arrivals [w] u32, zero between steps
  SP_OP_MLP = 6,
  // Piece j of a GEMV split into S pieces in groups of G (GEMV operand 7, ops/gemv.h
  // split_row_dot), for rows [tile_begin, tile_end): each row's canonical dot over the piece's
  // columns (W's view is those columns alone, x's the piece's slice) into partial row j; the
  // last of the S pieces to finish these rows (counted in their arrivals word, which it resets
  // to 0) sums the pieces' dots as split_row_dot does and writes out = r(res + r(y)), or r(y):
  // bit for bit the split GEMV's rows. What lets o_proj's piece of kv head g wait for g's
  // attention alone (docs/two-hop-layer.md). Tiles: output rows, the same for every piece.
  //   0 W [rows, K/S] bf16 (row stride K)   1 x [K/S] bf16   2 out [rows] bf16
  //   3 residual [rows] bf16 or SP_NO_VIEW: may alias out   4 partials [S, rows] f32
  //   5 arrivals [words] u32, zero between steps   6 imm: bits 0..15 the piece j, bits 16..31
  //   the rows' arrivals word   7 imm split, as GEMV's (S >= 2)
  SP_OP_GEMV_PIECE = 7,
  // The MoE router of one layer. Tiles: experts (rows of W). Each task writes its experts'
  // logits r(W[e]·normed(x)) as f32; the routing is EXPERT_GATE_UP's (ops/moe.h).
  //   0 W [E,H] bf16   1 x [H] bf16   2 norm weight [H] bf16   3 logits [E] f32, written
  //   4 params (SpMoeParams)
  SP_OP_ROUTER = 8,
  // The gate and up rows of the routed experts. Each task routes the token from the router's
  // logits: the softmax over all E in f32, the top k (the larger probability first, the lower
  // expert on a tie), renormalised when the params say so; the task of tile 0 writes the k slots
  // in that order, each {expert, its weight rounded to bf16, as f32 bits}, for EXPERT_DOWN
  // (ops/moe.h expert_gate_up_task). Tile t is row r = t % Im of slot s = t / Im, whose expert e
  // the routing names; act[s][r] = r(r(silu(r(Wg_e[r]·n))) * r(Wu_e[r]·n)) as GATE_UP,
  // n = normed(x). Expert e's gate rows are rows e·2Im + r of W, its up rows e·2Im + Im + r
  // (experts fused gate-then-up, as HF holds them). A slot whose expert the params' held experts
  // leave out is skipped (expert parallel: another device computes it). Tiles: slot-major rows.
  //   0 W [E·2Im, H] bf16   1 x [H] bf16   2 norm weight [H] bf16   3 routing [2k] u32, written
  //   4 act [k, Im] bf16, written   5 params (SpMoeParams)   6 logits [E] f32
  SP_OP_EXPERT_GATE_UP = 9,
  // The down rows of the routed experts and their weighted sum into the residual: for each row
  // r, y_s = r(Wd_e[r]·act[s]) for every slot s (expert e's rows are rows e·H + r of W), then
  // hidden[r] = r(hidden[r] + r(m)), m the f32 sum over the slots in order of r(w_s·y_s)
  // (ops/moe.h). Tiles: rows of hidden.
  //   0 W [E·H, Im] bf16   1 act [k, Im] bf16   2 routing [2k] u32   3 hidden [H] bf16, in place
  //   4 params (SpMoeParams)
  SP_OP_EXPERT_DOWN = 10,
  // ATTENTION with the gated attention of qwen3_next, qwen3_5 and qwen3_5_moe (spec §5.2): q_proj's
  // rows give each q head's query and its output gate side by side, so operand 0 is
  // [Hq*2D + 2Hkv*D]: q head h's query at h*2D, its gate at h*2D + D, then the k heads and the v
  // heads; the merge writes out = r(r(o) * r(sigmoid(gate))). Otherwise, tiles and operands as
  // ATTENTION's.
  SP_OP_GATED_ATTENTION = 11,
  // A Gated DeltaNet layer's decode step (ops/gdn.h, docs/numerics.md) for the value heads
  // whose state rows are the tiles: the causal conv (with SiLU) of a head's q and k channels (its
  // key head g = h / (Hv/Hk)) and v channels, its gates, the L2 norms, the delta-rule update of
  // its f32 state, and the gated RMSNorm of its output with its z. The conv state is a ring of Kc
  // inputs a channel, slot position % Kc, so that the value heads sharing a key head read its
  // older inputs while the group's first writes the newest. Tiles: state rows (value dim j of
  // head h is tile h*dv + j), whole heads a record, or one head a gang (tasks/gang.h), w members
  // of dv/w rows in two phases: the conv, gates, norms and the member's rows of the delta rule,
  // their outputs into proj's exchange; then the head's outputs read whole from it for their RMS
  // and the member's rows of the gated norm written to out. The sizes follow from the views:
  // C = conv rows, Kc = conv columns, Hv = A_log's elements, dv = the norm's, dk = the state's
  // columns, Hk = (C - Hv*dv) / (2*dk).
  //   0 proj [C + 2Hv*dv + 2Hv] bf16, written: the q, k and v channels (q heads, k heads, v
  //   heads), z, b, a, then the exchange [Hv*dv] (written only by members run at once)
  //   1 conv weight [C, Kc] bf16   2 A_log [Hv] bf16   3 dt_bias [Hv] bf16   4 norm weight [dv] bf16
  //   5 conv state [C, Kc] bf16, written   6 state [Hv*dv, dk] f32, written (row h*dv + j: value
  //   dim j of head h)   7 out [Hv*dv] bf16
  SP_OP_GDN = 12,
  // EXPERT_DOWN with the shared expert of qwen3_next and qwen3_5_moe (spec §6.3): each row's
  // routed sum f = r(m) becomes r(f + r(r(sigmoid(logit)) * s)), s = r(Wd_shared[r] · act_shared),
  // logit the shared expert gate's r(w_sg · normed(x)) (ops/moe.h add_shared_expert).
  //   0-4 as EXPERT_DOWN's   5 shared Wd [H, Is] bf16   6 shared act [Is] bf16
  //   7 shared gate logit [1] bf16
  SP_OP_EXPERT_DOWN_SHARED = 13,
  // The two halves of GEMV_PIECE as tasks of their own, for a row-parallel projection split
  // over devices (docs/multi-device.md): device j computes piece j's dots into partial row j of
  // the symmetric arena, and every device sums the pieces' rows. PIECE_DOTS: piece j of a GEMV
  // split into S pieces (GEMV operand 7), for rows [tile_begin, tile_end): each row's canonical
  // dot over the piece's columns, as f32, into partial row j. Tiles: output rows.
  //   0 W [rows, K/S] bf16 (row stride K)   1 x [K/S] bf16   2 partials [S, rows] f32
  //   3 imm the piece j
  SP_OP_PIECE_DOTS = 14,
  // The pieces' partial rows summed as split_row_dot sums them (ops/gemv.h split_sum), for
  // rows [tile_begin, tile_end): out = r(res + r(y)), or r(y): bit for bit the split GEMV's rows
  // (with PIECE_DOTS' pieces). Tiles: output rows.
  //   0 partials [S, rows] f32   1 out [rows] bf16   2 residual [rows] bf16 or SP_NO_VIEW: may
  //   alias out   3 imm split, as GEMV's (S >= 2)
  SP_OP_PIECE_SUM = 15,
  // EXPERT_DOWN's dots split as PIECE_DOTS and PIECE_SUM split a GEMV's: the routed experts'
  // down projections tensor-parallel (docs/multi-device.md). Each task
  // routes the token from the router's logits as EXPERT_GATE_UP does. EXPERT_DOWN_PIECE: piece j
  // of S, for rows [tile_begin, tile_end) of hidden: for each slot s, its expert e's down row r
  // (row e·H + r of W) · act_s over the piece's columns, as f32, into partial row j, column
  // s·H + r, for the slots whose expert the params hold (expert parallel: every device writes
  // the partial row 0 of its experts' slots, the piece then being every column). Tiles: rows of
  // hidden.
  //   0 W [E·H, Im/S] bf16 (the piece's columns, row stride Im)   1 act [k, Im/S] bf16 (the
  //   piece's columns)   2 logits [E] f32   3 partials [S, k·H] f32   4 params (SpMoeParams)
  //   5 imm the piece j
  SP_OP_EXPERT_DOWN_PIECE = 16,
  // The pieces summed into the residual: for each row r, y_s = r(the pieces of slot s summed as
  // split_row_dot sums them), then hidden[r] as EXPERT_DOWN (or with a shared expert
  // EXPERT_DOWN_SHARED) adds the slots' y_s (ops/moe.h expert_down_sum_rows). Tiles: rows of hidden.
  //   0 partials [S, k·H] f32   1 logits [E] f32   2 hidden [H] bf16, in place   3 params
  //   (SpMoeParams)   4 imm split, as GEMV's (S >= 2; 0: one piece, each slot's whole dot:
  //   expert parallel, or the shared expert's dots split alone)   5 shared Wd [H, Is] bf16, or
  //   the shared expert's down dots in Ss pieces [Ss, H] f32 (PIECE_DOTS', summed as the
  //   params' shared_split says, 0: as the slots'), or SP_NO_VIEW   6 shared act [Is] bf16
  //   (with Wd)   7 shared gate logit [1] bf16 (with 5)
  SP_OP_EXPERT_DOWN_SUM = 17,
  SP_OP_COUNT_ = 18  // one past the largest opcode
};

#define SP_OP_VALUE_CHECK_(NAME, name, value, executors) static_assert(SP_OP_##NAME == value, #NAME);
#ifdef __cplusplus
SP_OPS(SP_OP_VALUE_CHECK_)
#endif
#undef SP_OP_VALUE_CHECK_

#ifdef __cplusplus
// The executors with a tile for op (SP_ON_*); 0 for an unknown opcode.
SP_HD
constexpr uint32_t sp_op_executors(uint32_t op) {
#define SP_OP_EXECUTORS_(NAME, name, value, executors) op == value ? uint32_t(executors):
  return SP_OPS(SP_OP_EXECUTORS_) 0u;
#undef SP_OP_EXECUTORS_
}

// The op's name (SP_OPS), or nullptr for an unknown opcode.
constexpr const char* sp_opcode_name(uint32_t op) {
#define SP_OP_NAME_(NAME, name, value, executors) op == value ? #name:
  return SP_OPS(SP_OP_NAME_) nullptr;
#undef SP_OP_NAME_
}

// The weight matrices a projection task's rows read (GATE_UP: gate and up; GEMV and ROUTER,
// whose rows are a GEMV's: one); 0 for any other opcode, which is no projection.
SP_HD
inline uint32_t sp_projection_matrices(uint32_t op) {
  return op == SP_OP_GATE_UP ? 2u : op == SP_OP_GEMV || op == SP_OP_ROUTER ? 1u : 0u;
}
#endif

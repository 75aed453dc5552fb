// Opcodes and the meaning of each one's operand words. Operand words name views (see
// view.h) unless marked "imm". Tiles are the unit a task's [tile_begin, tile_end) counts.
#pragma once
#include <stdint.h>

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
  // chunks (ops/attention.h chunk_positions), for one kv head g and the q heads of its group.
  // The tile normalises (RMSNorm over head_dim) and rotates (RoPE at p) its q heads; the tile
  // whose chunk holds p also appends k (normed and rotated) and v at row p of the caches. Each
  // tile writes online-softmax partials; the group's last tile to finish in the step (counted
  // in the arrivals word of g, which it resets to 0) merges them in chunk order into out.
  // Tiles: kv_head * attn_chunks + chunk.
  //   0 qkv [(Hq+2Hkv)*D] bf16 (q heads, k heads, v heads)   1 q_norm [D]   2 k_norm [D]
  //   3 KV cache [2*Hkv*ctx, D] bf16: K row g*ctx + t, V row (Hkv+g)*ctx + t
  //   4 rope table [ctx, R] bf16   5 partials [Hq*chunks, D+2] f32 {m, l, acc[D]}
  //   6 out [Hq*D] bf16   7 arrivals [Hkv] u32, zero between steps
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
  SP_OP_COUNT_ = 8
};

#ifdef __cplusplus
// The weight matrices a projection task's rows read (GATE_UP: gate and up; GEMV: one); 0 for
// any other opcode, which is no projection.
#ifdef __CUDACC__
__host__ __device__
#endif
inline uint32_t sp_projection_matrices(uint32_t op) {
  return op == SP_OP_GATE_UP ? 2u : op == SP_OP_GEMV ? 1u : 0u;
}

inline const char* sp_opcode_name(uint32_t op) {
  switch (op) {
    case SP_OP_EMBED: return "embed";
    case SP_OP_GEMV: return "gemv";
    case SP_OP_GATE_UP: return "gate_up";
    case SP_OP_ATTENTION: return "attention";
    case SP_OP_SAMPLE: return "sample";
    case SP_OP_MLP: return "mlp";
    case SP_OP_GEMV_PIECE: return "gemv_piece";
    default: return nullptr;
  }
}
#endif

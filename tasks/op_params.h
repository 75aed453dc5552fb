// Per-op parameter records: the values one op needs beyond its views (an MoE layer's expert
// count, say), held in a table of the graph that a task's "params" operand word indexes, so
// that a new op's parameters do not grow SpGraphParams, which every task may read.
#pragma once
#include <stdint.h>

#include "tasks/host_device.h"
#ifdef __cplusplus
#include "tasks/gemv_split.h"
#endif

#define SP_OP_PARAM_WORDS 8u

struct SpOpParams {
  uint32_t word[SP_OP_PARAM_WORDS];  // meaning per op: one of the typed records below
};

// The router's and the routed experts' (ROUTER, EXPERT_GATE_UP, EXPERT_DOWN) record.
#define SP_MOE_NORMALISE 1u  // flags: renormalise the top k weights to sum to 1 (norm_topk_prob)
struct SpMoeParams {
  uint32_t experts;      // E: the router's rows and the experts a fused weight view holds
  uint32_t slots;        // k: experts chosen a token (num_experts_per_tok)
  uint32_t expert_rows;  // Im: an expert's gate (and up) rows, its down's columns
  uint32_t flags;        // SP_MOE_*
  // The words above are the model's (what a saved graph must agree on with the model it runs:
  // host/replay_check.h); those below, the partition's and the tiling's.
  // The experts this task's device holds (expert parallel, docs/multi-device.md): EXPERT_GATE_UP
  // and EXPERT_DOWN_PIECE skip a slot whose expert lies outside [held_first, held_first +
  // held_count); held_count 0: every expert, which the other ops' records must say.
  uint32_t held_first;
  uint32_t held_count;
  // How EXPERT_DOWN_SUM adds the shared expert's down dots where it reads them in pieces, as
  // GEMV's split word (tasks/gemv_split.h); 0: as the slots' (its operand 4). Expert parallel
  // the slots' dots are whole and the shared expert's split over the devices.
  uint32_t shared_split;
  uint32_t reserved;
};

#ifdef __cplusplus
static_assert(sizeof(SpOpParams) == 32, "SpOpParams must stay 8 words");
static_assert(sizeof(SpMoeParams) == sizeof(SpOpParams), "an op's record is one SpOpParams");
// The leading words of an SpMoeParams that are the model's (experts .. flags).
constexpr uint32_t kSpMoeModelWords = 4;

// A table entry read as its op's typed record (SpMoeParams, …).
template <class Record>
SP_HD
inline const Record& sp_op_record(const SpOpParams& p) {
  static_assert(sizeof(Record) == sizeof(SpOpParams), "an op's record is one SpOpParams");
  return reinterpret_cast<const Record&>(p);
}

// The split EXPERT_DOWN_SUM sums the shared expert's down dots' pieces with: the record's
// shared_split, else its operand 4's, the slots'.
SP_HD inline spindle::GemvSplit shared_pieces_split(uint32_t slots_split, const SpMoeParams& p) {
  return spindle::gemv_split(p.shared_split ? p.shared_split : slots_split);
}
#endif

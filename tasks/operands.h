// The role of each operand word of each opcode (host-side reading of tasks/opcodes.h), used
// by validate() and the JSON dump. Keep in step with the operand lists in opcodes.h.
#pragma once
#include <cstdint>

#include "tasks/task.h"

namespace spindle {

enum class OperandKind : uint8_t {
  Unused,
  View,          // a view id
  OptionalView,  // a view id or SP_NO_VIEW
  Immediate,
  Split,  // an immediate holding a GEMV split (tasks/gemv_split.h)
};

// A slot whose word names a view (when it is not SP_NO_VIEW).
inline bool is_view_kind(OperandKind kind) { return kind == OperandKind::View || kind == OperandKind::OptionalView; }

struct OperandInfo {
  OperandKind kind = OperandKind::Unused;
  const char* name = nullptr;  // as in opcodes.h
  bool written = false;        // a view the op writes (never a weight: validate() checks)
};

struct OpcodeOperands {
  OperandInfo operand[SP_TASK_OPERANDS];
};

// Unused slots for an unknown opcode.
inline OpcodeOperands opcode_operands(uint32_t op) {
  using K = OperandKind;
  switch (op) {
    case SP_OP_EMBED:
      return {{{K::View, "table"}, {K::View, "out", true}}};
    case SP_OP_GEMV:
      return {{{K::View, "W"}, {K::View, "x"}, {K::OptionalView, "norm"}, {K::View, "out", true},
               {K::OptionalView, "residual"}, {K::Immediate, "flags"},
               {K::OptionalView, "argmax", true}, {K::Split, "split"}}};
    case SP_OP_GATE_UP:
      return {{{K::View, "Wg"}, {K::View, "Wu"}, {K::View, "x"}, {K::View, "norm"},
               {K::View, "out", true}}};
    case SP_OP_ATTENTION:
      return {{{K::View, "qkv"}, {K::View, "q_norm"}, {K::View, "k_norm"}, {K::View, "kv_cache", true},
               {K::View, "rope"}, {K::View, "partials", true}, {K::View, "out", true}, {K::View, "arrivals", true}}};
    case SP_OP_SAMPLE:
      return {{{K::View, "logits"}, {K::View, "argmax"}, {K::Immediate, "partial_count"},
               {K::View, "forced"}, {K::View, "out_tokens", true}}};
    case SP_OP_MLP:
      return {{{K::View, "Wg"}, {K::View, "Wu"}, {K::View, "Wd"}, {K::View, "hidden", true}, {K::View, "norm"},
               {K::View, "partials", true}, {K::View, "arrivals", true}}};
    case SP_OP_GEMV_PIECE:
      return {{{K::View, "W"}, {K::View, "x"}, {K::View, "out", true}, {K::OptionalView, "residual"},
               {K::View, "partials", true}, {K::View, "arrivals", true}, {K::Immediate, "piece"}, {K::Split, "split"}}};
    default:
      return {};
  }
}

// Calls f(k, view id) for each operand slot k of `t` that holds a view.
template <class F>
void for_each_view_operand(const SpTask& t, F&& f) {
  const OpcodeOperands ops = opcode_operands(t.op);
  for (uint32_t k = 0; k < SP_TASK_OPERANDS; ++k) {
    if (is_view_kind(ops.operand[k].kind) && t.operand[k] != SP_NO_VIEW) f(k, t.operand[k]);
  }
}

}  // namespace spindle

// Each op declared once: the role of each operand word, the check of a task's operands, the
// weights it reads (its cost), and the bf16 input its tiles stage in shared memory. Its name,
// value and executors are in tasks/opcodes.h SP_OPS. validate(), the JSON dump, the bytes that
// `info` and `bench` count and every executor's capability checks follow from these.
#pragma once
#include <cstdint>
#include <functional>

#include "tasks/task.h"

namespace spindle {

struct Graph;

// Taps of the Gated DeltaNet's causal conv at most (GDN): the released models have 4; a tile
// keeps a channel's window at hand.
inline constexpr uint32_t kMaxConvKernel = 8;
class OperandCheck;

enum class OperandKind : uint8_t {
  Unused,
  View,          // a view id
  OptionalView,  // a view id or SP_NO_VIEW
  Immediate,
  Split,   // an immediate holding a GEMV split (tasks/gemv_split.h)
  Params,  // an index into the graph's op parameter records (tasks/op_params.h)
};
// A slot whose word names a view (when it is not SP_NO_VIEW).
inline bool is_view_kind(OperandKind kind) { return kind == OperandKind::View || kind == OperandKind::OptionalView; }

struct OperandInfo {
  OperandKind kind = OperandKind::Unused;
  const char* name = nullptr;  // as in tasks/opcodes.h
  bool written = false;        // a view the op writes (never a weight: validate() checks)
  // A fused weight view of every expert of a layer, of which the task reads the rows of the
  // experts its routing operand names when it runs: the graph's shape stays static while the
  // experts read change every token.
  bool routed = false;
};

struct OpcodeOperands {
  OperandInfo operand[SP_TASK_OPERANDS];
};

// Where a task's tiles read some rows of a weight operand alone: add(k, first row, end row) of
// operand k's view (a routed operand's rows of every expert it may read).
using WeightRowsSink = std::function<void(uint32_t k, uint64_t row0, uint64_t row1)>;

struct OpDecl {
  OpcodeOperands operands;
  // Refuses (OperandCheck::refuse) a task whose operands, tiles or parameters its op cannot
  // serve: what keeps every executor inside the task's views (docs/graph-format.md).
  void (*check)(const Graph& g, const SpTask& t, const OperandCheck& o);
  // Bytes of its routed operands' weights the task reads a step (the chosen experts' rows:
  // the same count whichever they are; expert parallel, its device's share of them when the
  // routing spreads evenly), or nullptr for an op without routed operands. Its
  // other weights are its views' (host/cli/graph_stats.h counts both).
  uint64_t (*routed_weight_bytes)(const Graph& g, const SpTask& t);
  // bf16 elements of input the op's tiles stage in shared memory (with the room of the 32-bit
  // words the MoE tiles keep there, two elements a word), 0 for none: what the Vulkan executor
  // sizes the shaders' shared vectors by (the CUDA tiles' layouts, with their other buffers,
  // are megakernel/task_smem.cpp's).
  uint64_t (*staged_input)(const Graph& g, const SpTask& t);
  // The rows of its weight operands the task's tiles may read, for whatever input (any token,
  // any routing), where they are not the whole view: the weight shard a device must hold
  // (tasks/weight_shard.h). nullptr, or an operand it does not name: the whole view.
  void (*weight_rows)(const Graph& g, const SpTask& t, const WeightRowsSink& add);
};

// The declaration of op, or nullptr for an unknown opcode.
const OpDecl* op_decl(uint32_t op);

// The roles of op's operand words; unused slots for an unknown opcode.
inline OpcodeOperands opcode_operands(uint32_t op) {
  const OpDecl* d = op_decl(op);
  return d ? d->operands : OpcodeOperands{};
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

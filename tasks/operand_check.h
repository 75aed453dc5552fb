// The checks an op's declaration (tasks/op_decls.h) makes of a task's operands: each refuses,
// with a message naming the operand and its view, what would take a tile outside its views.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>

#include "tasks/graph.h"
#include "tasks/op_decls.h"

namespace spindle {

// Thrown by OperandCheck::refuse and caught where the problem is returned (operand_bounds.h).
struct OperandRefusal {
  std::string why;
};

[[noreturn]] void refuse(std::string why);

// Elements a view holds read as one array from its first: its rows do not overlap
// (validate() checks row_stride >= cols), so these are inside its extent.
inline uint64_t view_elements(const SpView& v) { return uint64_t(v.rows) * v.cols; }

// A projection's row length (K) at most: longer than any model's rows (the config allows
// 2^20 intermediate columns), and short enough that the executors' shared-memory sizes for a
// row, counted in 32 bits, cannot wrap.
constexpr uint32_t kMaxRowLength = 1u << 20;

class OperandCheck {
 public:
  OperandCheck(const Graph& g, const SpTask& t);

  bool present(uint32_t k) const { return t_.operand[k] != SP_NO_VIEW; }
  const SpView& view(uint32_t k) const { return g_.views[t_.operand[k]]; }
  // The op parameter record operand k names (checked to be in the graph's table).
  const SpOpParams& params(uint32_t k) const;

  // Operand k is one of `dtypes` and holds at least n elements as one array.
  void array(uint32_t k, std::initializer_list<SpDtype> dtypes, uint64_t n, const char* what) const;
  // Operand k is of dtype dt with at least `rows` rows of at least `cols` columns.
  void matrix(uint32_t k, SpDtype dt, uint64_t rows, uint64_t cols, const char* what) const;
  // Operand k's rows are at most kMaxRowLength long.
  void row_length(uint32_t k) const;
  // No operand the op writes is in a weight arena: executors map those read-only.
  void written_outside_weights() const;
  // Operand k has operand j's columns and row stride (the op reads both through j's).
  void same_rows(uint32_t k, uint32_t j) const;
  // "operand k 'name' (view v 'view name')", for messages.
  std::string name(uint32_t k) const;

 private:
  void dtype(uint32_t k, std::initializer_list<SpDtype> dtypes) const;

  const Graph& g_;
  const SpTask& t_;
  OpcodeOperands info_;
};

}  // namespace spindle

// The op declarations (tasks/op_decls.h) as the executors rely on them.
#include <doctest/doctest.h>

#include "tasks/op_decls.h"
#include "tasks/opcodes.h"

using namespace spindle;

// The CUDA executor stages a task's parameter record beside its views as operand 0
// (megakernel/cuda_executor.cpp staged_tasks), which holds one record a task.
TEST_CASE("every op declares at most one parameter record operand") {
  uint32_t ops_with_records = 0;
  for (uint32_t op = 0; op < SP_OP_COUNT_; ++op) {
    if (!op_decl(op)) continue;
    CAPTURE(sp_opcode_name(op));
    uint32_t records = 0;
    for (const OperandInfo& o : opcode_operands(op).operand) records += o.kind == OperandKind::Params;
    CHECK(records <= 1);
    ops_with_records += records;
  }
  CHECK(ops_with_records >= 3);  // the MoE ops' SpMoeParams
}

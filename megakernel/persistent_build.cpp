#include "megakernel/persistent_build.h"

#include <algorithm>
#include <string>

#include "tasks/error.h"
#include "tasks/gemv_split.h"
#include "tasks/op_decls.h"

namespace spindle::cuda {

TileBuild persistent_build(const Graph& g) {
  const auto all_in = [&g](TileBuild b) {
    return std::all_of(g.tasks.begin(), g.tasks.end(), [b](const SpTask& t) {
      return (sp_op_executors(t.op) & build_flag(b)) && !(t.op == SP_OP_GEMV && gemv_split(t.operand[7]).pieces > 1);
    });
  };
  if (all_in(TileBuild::kPlain)) return TileBuild::kPlain;
  if (all_in(TileBuild::kMoe)) return TileBuild::kMoe;
  for (size_t i = 0; i < g.tasks.size(); ++i)
    if (!(sp_op_executors(g.tasks[i].op) & SP_ON_CUDA_TWO_HOP))
      throw Error("cuda megakernel: task " + std::to_string(i) + " (" + sp_opcode_name(g.tasks[i].op) +
                  ") has no tile in the persistent kernel yet; the per-op and graph modes run it (--profile per-op, "
                  "--profile graph)");
  return TileBuild::kTwoHop;
}

}  // namespace spindle::cuda

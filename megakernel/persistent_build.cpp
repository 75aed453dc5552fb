#include "megakernel/persistent_build.h"

#include <algorithm>

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
  return TileBuild::kTwoHop;
}

}  // namespace spindle::cuda

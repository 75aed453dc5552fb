// Which tiles a kernel is built with (megakernel/run_device_task.cuh), host and device alike:
//  kPlain:  the persistent kernel's plain build, the dense models' lean path, without the tiles
//           of the two-hop layer (docs/two-hop-layer.md): split GEMV dots (tile_projection.cuh
//           run_gemv says why a build without them matters), MLP gang tasks and GEMV pieces;
//  kMoe:    the plain build's dispatch and tiles but GATE_UP, with the routed experts' (ROUTER,
//           EXPERT_GATE_UP, EXPERT_DOWN): qwen3_moe's graphs, which need nothing of the two-hop
//           build's, run in a kernel without its code;
//  kTwoHop: every tile but the four ops of a step over devices (PIECE_DOTS, PIECE_SUM,
//           EXPERT_DOWN_PIECE, EXPERT_DOWN_SUM: they made it spill), the two-hop layer's and the
//           hybrid families' (1 block an SM);
//  kPerOp:  the per-op kernels, with every tile, whole gangs' rows in global memory read in
//           groups (tile_mlp.cuh mlp_piece).
// A build's code weighs on every task it runs, also code it never runs (docs/EXPERIMENTS.md),
// so each leaves out what the smaller graphs do not need.
#pragma once
#include <stdint.h>

#include "tasks/host_device.h"
#include "tasks/opcodes.h"

namespace spindle::cuda {

enum class TileBuild { kPlain, kMoe, kTwoHop, kPerOp };

// The build's flag in tasks/opcodes.h SP_OPS: an op has a tile in the build when its entry says so.
SP_HD constexpr uint32_t build_flag(TileBuild b) {
  switch (b) {
    case TileBuild::kPlain: return SP_ON_CUDA_PLAIN;
    case TileBuild::kMoe: return SP_ON_CUDA_MOE;
    case TileBuild::kTwoHop: return SP_ON_CUDA_TWO_HOP;
    default: return SP_ON_CUDA_PER_OP;
  }
}

// The name `describe()` gives a persistent build.
inline const char* tile_build_name(TileBuild b) {
  return b == TileBuild::kPlain ? "plain" : b == TileBuild::kMoe ? "MoE" : "two-hop";
}

}  // namespace spindle::cuda

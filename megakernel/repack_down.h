// The persistent kernel's layout of an MLP graph's down weights, and the cluster program's of
// o_proj (engine-internal; the graph and the checkpoint keep them row-major): piece-major, so
// that a piece's rows of its columns are one contiguous block that bulk copies bring into
// shared memory.
#pragma once
#include <cstdint>

namespace spindle::cuda {

// A staged down view (StagedTask) with this row stride holds its weight repacked piece-major:
// piece j's H rows of P columns, row after row, from element j * H * P.
constexpr uint32_t kPieceMajorStride = 0;

// Rewrites the bf16 matrix [rows, cols] with `stride` elements between rows at device address
// `w`, in place, as cols / piece blocks [rows][piece], block j from element j * rows * piece.
// Synchronous. `piece` divides cols.
void repack_piece_major(void* w, uint32_t rows, uint32_t cols, uint32_t stride, uint32_t piece);

}  // namespace spindle::cuda

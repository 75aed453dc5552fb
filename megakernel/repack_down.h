// The persistent kernel's layout of an MLP graph's down weights (engine-internal; the graph and
// the checkpoint keep the row-major [H, I]): piece-major, so that a member's H rows of its P
// columns are one contiguous block that one bulk copy brings into shared memory.
#pragma once
#include <cstdint>

namespace spindle::cuda {

// A staged down view (StagedTask) with this row stride holds its weight repacked piece-major:
// piece j's H rows of P columns, row after row, from element j * H * P.
constexpr uint32_t kPieceMajorStride = 0;

// Rewrites the bf16 matrix [rows, cols] with `stride` elements between rows at device address
// `w`, in place, as cols / piece blocks [rows][piece], block j from element j * rows * piece.
// Synchronous. `piece` divides cols.
void repack_down_pieces(void* w, uint32_t rows, uint32_t cols, uint32_t stride, uint32_t piece);

}  // namespace spindle::cuda

#include "tasks/byte_ranges.h"

#include <algorithm>

namespace spindle {

void add_view_rows(const SpView& v, uint64_t row0, uint64_t row1, std::vector<ByteRange>& out) {
  const uint64_t e = sp_dtype_bytes(v.dtype), at = sp_view_offset(v), stride = uint64_t(v.row_stride) * e;
  row1 = std::min<uint64_t>(row1, v.rows);
  if (row0 >= row1 || v.cols == 0) return;
  if (v.cols == v.row_stride || row1 - row0 == 1) {
    out.push_back({at + row0 * stride, at + (row1 - 1) * stride + uint64_t(v.cols) * e});
    return;
  }
  for (uint64_t r = row0; r < row1; ++r) out.push_back({at + r * stride, at + r * stride + uint64_t(v.cols) * e});
}

void merge_ranges(std::vector<ByteRange>& ranges) {
  std::sort(ranges.begin(), ranges.end(), [](ByteRange a, ByteRange b) { return a.begin < b.begin; });
  size_t n = 0;
  for (const ByteRange& r : ranges) {
    if (n && r.begin <= ranges[n - 1].end) ranges[n - 1].end = std::max(ranges[n - 1].end, r.end);
    else ranges[n++] = r;
  }
  ranges.resize(n);
}

uint64_t range_bytes(const std::vector<ByteRange>& ranges) {
  uint64_t total = 0;
  for (const ByteRange& r : ranges) total += r.end - r.begin;
  return total;
}

}  // namespace spindle

// Byte ranges of an arena that views cover: what `info` counts as read and what a device's
// weight shard holds (tasks/weight_shard.h).
#pragma once
#include <cstdint>
#include <vector>

#include "tasks/view.h"

namespace spindle {

struct ByteRange {
  uint64_t begin, end;  // [begin, end) bytes of an arena
};

// Rows [row0, row1) of view v (rows past its end left out) appended as byte ranges of its
// arena: one range where its rows are whole, one a row where they are some of a wider matrix's
// columns.
void add_view_rows(const SpView& v, uint64_t row0, uint64_t row1, std::vector<ByteRange>& out);

// Sorts the ranges and joins those that touch or overlap.
void merge_ranges(std::vector<ByteRange>& ranges);

// The bytes of ranges already merged.
uint64_t range_bytes(const std::vector<ByteRange>& ranges);

}  // namespace spindle

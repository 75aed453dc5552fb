#include "megakernel/l2_prefetch.h"

#include <algorithm>

#include "megakernel/task_weights.h"

namespace spindle::cuda {
namespace {

// A GDN record's delta-rule state rows (its tiles: tasks/opcodes.h SP_OP_GDN operand 6, dk f32
// a row): read before they are written, and by no earlier task of the step, so the L2 can hold
// them ahead as it holds weights.
std::vector<WeightSpan> recurrent_state_spans(const Graph& g, const SpTask& t) {
  if (t.op != SP_OP_GDN || t.tile_end <= t.tile_begin) return {};
  const SpView& S = g.views[t.operand[6]];
  const uint64_t row_bytes = uint64_t(S.row_stride) * sp_dtype_bytes(S.dtype);
  const uint64_t first = sp_view_offset(S) + t.tile_begin * row_bytes;
  return {{S.arena, first, first + (t.tile_end - t.tile_begin) * row_bytes}};
}

// The target stage's weights and recurrent state in task order, 16-byte aligned (outward,
// within the arena), cut after `budget` bytes.
std::vector<WeightSpan> stage_weight_spans(const Graph& g, const Stage& st, uint64_t budget) {
  std::vector<WeightSpan> spans;
  uint64_t taken = 0;
  for (uint32_t i = st.first_task; i < st.first_task + st.tasks && taken < budget; ++i) {
    std::vector<WeightSpan> task_spans = task_weight_spans(g, g.tasks[i]);
    for (const WeightSpan& s : recurrent_state_spans(g, g.tasks[i])) task_spans.push_back(s);
    for (const WeightSpan& w : task_spans) {
      if ((w.arena < SP_ARENA_WEIGHTS0 && w.arena != SP_ARENA_RECURRENT) || taken >= budget) continue;
      const uint64_t begin = w.begin & ~uint64_t(15), end = std::min((w.end + 15u) & ~uint64_t(15), g.arenas[w.arena].bytes);
      const uint64_t kept = std::min(end - begin, budget - taken);
      spans.push_back({w.arena, begin, begin + kept});
      taken += kept;
    }
  }
  return spans;
}

// Sorted, with overlapping or touching spans of one arena joined.
std::vector<WeightSpan> merged(std::vector<WeightSpan> spans) {
  std::sort(spans.begin(), spans.end(),
            [](const WeightSpan& a, const WeightSpan& b) {
              return a.arena != b.arena ? a.arena < b.arena : a.begin < b.begin;
            });
  std::vector<WeightSpan> out;
  for (const WeightSpan& s : spans) {
    if (!out.empty() && out.back().arena == s.arena && s.begin <= out.back().end)
      out.back().end = std::max(out.back().end, s.end);
    else out.push_back(s);
  }
  return out;
}

// Pieces per range for `tasks` tasks: one each (the first `tasks` ranges when there are more),
// the rest in proportion to the ranges' bytes.
std::vector<uint32_t> pieces_per_range(const std::vector<WeightSpan>& ranges, uint32_t tasks) {
  std::vector<uint32_t> pieces(ranges.size(), 0);
  uint64_t total = 0;
  for (size_t r = 0; r < ranges.size() && r < tasks; ++r) {
    pieces[r] = 1;
    total += ranges[r].end - ranges[r].begin;
  }
  uint32_t left = tasks > ranges.size() ? tasks - uint32_t(ranges.size()) : 0;
  const uint32_t extra = left;
  for (size_t r = 0; r < ranges.size() && left && total; ++r) {
    const uint32_t more = std::min<uint64_t>(left, extra * (ranges[r].end - ranges[r].begin) / total);
    pieces[r] += more;
    left -= more;
  }
  return pieces;
}

}  // namespace

std::vector<L2Prefetch> plan_l2_prefetch(const Graph& g, const std::vector<Stage>& stages, uint32_t distance,
                                         uint64_t stage_budget) {
  std::vector<L2Prefetch> plan(g.tasks.size(), L2Prefetch{0, 0, 0});
  if (distance == 0 || stage_budget == 0 || stages.empty()) return plan;
  const std::vector<Stage> runs = op_runs(g, stages);
  for (size_t s = 0; s < runs.size(); ++s) {
    const Stage& st = runs[s];
    const Stage& target = runs[(s + distance) % runs.size()];
    const std::vector<WeightSpan> ranges = merged(stage_weight_spans(g, target, stage_budget));
    const std::vector<uint32_t> pieces = pieces_per_range(ranges, st.tasks);
    uint32_t task = st.first_task;
    for (size_t r = 0; r < ranges.size(); ++r) {
      const uint64_t bytes = ranges[r].end - ranges[r].begin;
      const uint64_t piece = pieces[r] ? ((bytes + pieces[r] - 1) / pieces[r] + 15u) & ~uint64_t(15) : 0;
      for (uint64_t at = ranges[r].begin; piece && at < ranges[r].end; at += piece)
        plan[task++] = {ranges[r].arena, uint32_t(std::min(piece, ranges[r].end - at)), at};
    }
  }
  return plan;
}

}  // namespace spindle::cuda

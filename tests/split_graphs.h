// One-device graphs with the split ops of a step over devices (docs/multi-device.md), for the
// GPU executors, which run one device: the experts' down in pieces, and a split GEMV rewritten
// as a row-parallel projection is over devices (host/graph_emitter.h row_parallel), PIECE_DOTS
// tasks then PIECE_SUM tasks, which the builder emits only over several devices.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "host/graph_builder.h"
#include "tasks/gemv_split.h"
#include "tasks/graph.h"

namespace spindle::test {

// The experts' down dots' split, and the shared expert's (pieces 0: as the routed ones'; 1: its
// rows whole).
struct DownSplits {
  GemvSplit routed, shared;
};

// The graphs' context: 64 positions in 3 attention chunks.
inline BuildOptions short_context() {
  BuildOptions o;
  o.context = 64;
  o.attn_chunks = 3;
  return o;
}

// Those splits at the short context.
inline BuildOptions expert_down_split_options(const DownSplits& s) {
  BuildOptions o = short_context();
  o.expert_down_split = s.routed;
  o.shared_down_split = s.shared;
  return o;
}

// g with each stage of GEMV tasks split {S, G} (no norm, no argmax: o_proj and down) as S
// PIECE_DOTS tasks a task, over the piece's columns of W and of x, into an f32 partials view of
// the WORK arena, signalling the stage's counter; then a stage of one PIECE_SUM task a task
// summing them into its out rows (with its residual), signalling a new counter that the
// stage's waiters wait on instead. Returns g unchanged when it has no such stage.
inline Graph with_piece_sums(const Graph& g) {
  Graph out = g;
  out.tasks.clear();
  std::vector<uint32_t> waiters_to(g.num_counters());
  for (uint32_t c = 0; c < waiters_to.size(); ++c) waiters_to[c] = c;
  const auto add_view = [&](const std::string& name, SpView v, uint64_t offset) {
    v.offset_lo = uint32_t(offset);
    v.offset_hi = uint32_t(offset >> 32);
    out.views.push_back(v);
    out.view_names.push_back(name);
    return uint32_t(out.views.size() - 1);
  };
  for (size_t i = 0; i < g.tasks.size();) {
    const SpTask& first = g.tasks[i];
    const GemvSplit s = gemv_split(first.op == SP_OP_GEMV ? first.operand[7] : 0u);
    if (s.pieces < 2 || first.operand[2] != SP_NO_VIEW || (first.operand[5] & 1u)) {
      out.tasks.push_back(first);
      ++i;
      continue;
    }
    size_t end = i;
    while (end < g.tasks.size() && g.tasks[end].signal_counter == first.signal_counter) {
      const SpTask& t = g.tasks[end++];
      REQUIRE_MESSAGE((t.op == SP_OP_GEMV && t.operand[0] == first.operand[0] && t.operand[1] == first.operand[1] &&
                       t.operand[7] == first.operand[7]),
                      "stage " << g.counter_names[first.signal_counter] << " is not one split GEMV");
    }
    const SpView &W = g.views[first.operand[0]], &x = g.views[first.operand[1]];
    const uint32_t P = W.cols / s.pieces, rows = W.rows;
    const std::string name = g.counter_names[first.signal_counter];
    uint64_t& work = out.arenas[SP_ARENA_WORK].bytes;
    work = (work + 255) / 256 * 256;
    SpView p{SP_ARENA_WORK, SP_F32, 0, 0, s.pieces, rows, rows, 0};
    const uint32_t partials = add_view(name + ".partials", p, work);
    work += uint64_t(s.pieces) * rows * sizeof(float);
    const uint32_t sums = out.num_counters();
    out.counter_names.push_back(name + ".sum");
    for (uint32_t j = 0; j < s.pieces; ++j) {
      SpView Wj = W, xj = x;
      Wj.cols = xj.cols = P;
      const uint32_t w = add_view(g.view_names[first.operand[0]] + ".piece" + std::to_string(j), Wj,
                                  sp_view_offset(W) + uint64_t(j) * P * sizeof(uint16_t));
      const uint32_t in = add_view(g.view_names[first.operand[1]] + ".piece" + std::to_string(j), xj,
                                   sp_view_offset(x) + uint64_t(j) * P * sizeof(uint16_t));
      for (size_t k = i; k < end; ++k) {
        SpTask dots = g.tasks[k];
        dots.op = SP_OP_PIECE_DOTS;
        for (uint32_t& o : dots.operand) o = SP_NO_VIEW;
        dots.operand[0] = w;
        dots.operand[1] = in;
        dots.operand[2] = partials;
        dots.operand[3] = j;
        out.tasks.push_back(dots);
      }
    }
    for (size_t k = i; k < end; ++k) {
      const SpTask& t = g.tasks[k];
      SpTask sum = t;
      sum.op = SP_OP_PIECE_SUM;
      for (uint32_t& o : sum.operand) o = SP_NO_VIEW;
      sum.operand[0] = partials;
      sum.operand[1] = t.operand[3];
      sum.operand[2] = t.operand[4];
      sum.operand[3] = t.operand[7];
      sum.wait_counter = first.signal_counter;
      sum.wait_count = uint32_t(s.pieces * (end - i));
      sum.wait_mode = SP_WAIT_SAME_STEP;
      sum.signal_counter = sums;
      out.tasks.push_back(sum);
    }
    waiters_to[first.signal_counter] = sums;
    i = end;
  }
  for (SpTask& t : out.tasks)
    if (t.op != SP_OP_PIECE_SUM && t.wait_counter != SP_NO_COUNTER) t.wait_counter = waiters_to[t.wait_counter];
  validate(out);
  return out;
}

// w's graph with o_proj split 2/2 and down 4/2, and the same rewritten by with_piece_sums: the
// second must give the first's bits.
struct SplitAndPieces {
  Graph split, pieces;
};
inline SplitAndPieces split_and_piece_sums(const ModelWeights& w) {
  BuildOptions o = short_context();
  o.o_proj_split = {2, 2};
  o.down_split = {4, 2};
  SplitAndPieces g{build_decode_graph(w, o), {}};
  g.pieces = with_piece_sums(g.split);
  REQUIRE(std::any_of(g.pieces.tasks.begin(), g.pieces.tasks.end(), [](const SpTask& t) { return t.op == SP_OP_PIECE_SUM; }));
  return g;
}

}  // namespace spindle::test

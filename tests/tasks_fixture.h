// A small valid graph for the task-ISA tests: embed, an LM head split into two GEMV tasks,
// and a sample task whose signal the next step's embed waits on.
#pragma once
#include "tasks/graph.h"

namespace spindle::test {

enum : uint32_t { kTable, kHidden, kLmHead, kLogits, kArgmax, kForced, kOut, kViewCount };
enum : uint32_t { kCEmbed, kCLmHead, kCSample };
enum : uint32_t { kTEmbed, kTHead0, kTHead1, kTSample };

inline SpView make_view(uint32_t arena, uint32_t dtype, uint64_t offset, uint32_t rows,
                        uint32_t cols) {
  return {arena, dtype, uint32_t(offset), uint32_t(offset >> 32), rows, cols, cols, 0};
}

inline SpTask make_task(uint32_t op, uint32_t wait, uint32_t count, uint32_t mode,
                        uint32_t signal) {
  SpTask t{};
  t.op = op;
  t.layer = 0xFFFFFFFFu;
  t.tile_end = 1;
  t.wait_counter = wait;
  t.wait_count = count;
  t.wait_mode = mode;
  t.signal_counter = signal;
  for (uint32_t& o : t.operand) o = SP_NO_VIEW;
  return t;
}

inline Graph small_graph() {
  constexpr uint32_t V = 8, H = 4, steps = 4;
  Graph g;
  g.model = "test:small";
  g.params.hidden = H;
  g.params.n_heads = 1;  // no attention task, but dimensions every executor plans with
  g.params.n_kv_heads = 1;
  g.params.head_dim = H;
  g.params.attn_chunks = 1;
  g.params.attn_q_splits = 1;
  g.params.vocab = V;
  g.params.context = steps;
  g.params.max_steps = steps;
  g.params.rms_eps = 1e-6f;
  g.params.rope_theta = 1e6f;
  g.arenas = {{"state", SP_STATE_FORCED_OFFSET + 2 * 4 * steps},
              {"work", H * 2 + V * 4 + 2 * 8},
              {"kv", 0},
              {"const", 0},
              {"recurrent", 0},
              {"symmetric", 0},
              {"weights0", 2 * V * H * 2}};
  g.views.resize(kViewCount);
  g.view_names.resize(kViewCount);
  auto add = [&](uint32_t id, const char* name, SpView v) {
    g.views[id] = v;
    g.view_names[id] = name;
  };
  add(kTable, "embed_tokens", make_view(SP_ARENA_WEIGHTS0, SP_BF16, 0, V, H));
  add(kLmHead, "lm_head", make_view(SP_ARENA_WEIGHTS0, SP_BF16, V * H * 2, V, H));
  add(kHidden, "hidden", make_view(SP_ARENA_WORK, SP_BF16, 0, 1, H));
  add(kLogits, "logits", make_view(SP_ARENA_WORK, SP_F32, H * 2, 1, V));
  add(kArgmax, "argmax", make_view(SP_ARENA_WORK, SP_U32, H * 2 + V * 4, 2, 2));
  add(kForced, "forced", make_view(SP_ARENA_STATE, SP_U32, SP_STATE_FORCED_OFFSET, 1, steps));
  add(kOut, "out", make_view(SP_ARENA_STATE, SP_U32, SP_STATE_FORCED_OFFSET + 4 * steps, 1, steps));
  g.counter_names = {"embed", "lm_head", "sample"};
  g.io = {kLogits, kForced, kOut};

  SpTask embed = make_task(SP_OP_EMBED, kCSample, 1, SP_WAIT_PREV_STEP, kCEmbed);
  embed.tile_end = H;
  embed.operand[0] = kTable;
  embed.operand[1] = kHidden;
  g.tasks.push_back(embed);
  for (uint32_t half = 0; half < 2; ++half) {
    SpTask gemv = make_task(SP_OP_GEMV, kCEmbed, 1, SP_WAIT_SAME_STEP, kCLmHead);
    gemv.tile_begin = half * V / 2;
    gemv.tile_end = (half + 1) * V / 2;
    gemv.operand[0] = kLmHead;
    gemv.operand[1] = kHidden;
    gemv.operand[3] = kLogits;
    gemv.operand[5] = 1u | (half << 16);
    gemv.operand[6] = kArgmax;
    gemv.operand[7] = 0;  // no split
    g.tasks.push_back(gemv);
  }
  SpTask sample = make_task(SP_OP_SAMPLE, kCLmHead, 2, SP_WAIT_SAME_STEP, kCSample);
  sample.operand[0] = kLogits;
  sample.operand[1] = kArgmax;
  sample.operand[2] = 2;
  sample.operand[3] = kForced;
  sample.operand[4] = kOut;
  g.tasks.push_back(sample);
  return g;
}

}  // namespace spindle::test

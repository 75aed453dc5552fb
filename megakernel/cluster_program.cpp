#include "megakernel/cluster_program.h"

#include <algorithm>

#include "megakernel/tile_layout.h"
#include "tasks/error.h"
#include "tasks/gang.h"
#include "tasks/gemv_piece.h"
#include "tasks/gemv_split.h"
#include "tasks/mlp_shape.h"

namespace spindle::cuda {
namespace {

// The tasks of one layer that the program reads its operands from (the first of each kind).
struct LayerTasks {
  const SpTask *attention = nullptr, *q = nullptr, *k = nullptr, *v = nullptr, *o_proj = nullptr, *mlp = nullptr;
  uint32_t attention_index = 0, o_proj_index = 0, mlp_index = 0;
  GemvSplit o_split;
};

struct TailTasks {
  const SpTask *embed = nullptr, *lm_head = nullptr, *sample = nullptr;
  uint32_t embed_index = 0, lm_head_index = 0, sample_index = 0;
};

struct Found {
  std::vector<LayerTasks> layers;
  TailTasks tail;
  std::string problem;
};

// How a graph for the program is built.
std::string build_hint(const SpGraphParams& p) {
  return " (build with --tune kv-head-waits=on --tune o-proj-split=" + std::to_string(p.n_kv_heads) +
         " --tune attn-chunks=8 --tune fused-mlp=PIECES/8)";
}

uint64_t view_begin(const Graph& g, uint32_t v) { return sp_view_offset(g.views[v]); }

bool same_place(const Graph& g, uint32_t a, uint32_t b) {
  return g.views[a].arena == g.views[b].arena && view_begin(g, a) == view_begin(g, b);
}

// True when the program may read `rows` rows of `cols` bf16 from view v's first, its row stride
// apart, copying them in 16-byte pieces: they lie in the view's arena (the program sizes its
// reads from the graph's dimensions and layer 0, not from each view), and the view starts on
// 16 bytes, as bulk copies need.
bool bulk_readable(const Graph& g, uint32_t v, uint64_t rows, uint64_t cols) {
  const SpView& w = g.views[v];
  const unsigned __int128 end =
      view_begin(g, v) + ((unsigned __int128)(rows ? rows - 1 : 0) * w.row_stride + cols) * sizeof(bf16);
  return w.dtype == SP_BF16 && view_begin(g, v) % 16 == 0 && end <= g.arenas[w.arena].bytes;
}

// Which of q, k, v a GEMV writes: its output's place in the attention's qkv view.
const SpTask** qkv_slot(const Graph& g, LayerTasks& lt, const SpTask& t) {
  const SpView &out = g.views[t.operand[3]], &qkv = g.views[lt.attention->operand[0]];
  if (out.arena != qkv.arena) return nullptr;
  const SpGraphParams& p = g.params;
  const uint64_t at = (view_begin(g, t.operand[3]) - view_begin(g, lt.attention->operand[0])) / 2;
  if (at == 0) return &lt.q;
  if (at == uint64_t(p.n_heads) * p.head_dim) return &lt.k;
  if (at == uint64_t(p.n_heads + p.n_kv_heads) * p.head_dim) return &lt.v;
  return nullptr;
}

Found find_tasks(const Graph& g) {
  const SpGraphParams& p = g.params;
  Found f;
  f.layers.resize(p.n_layers);
  auto fail = [&](const std::string& why) {
    if (f.problem.empty()) f.problem = why;
  };
  for (uint32_t i = 0; i < g.tasks.size(); ++i) {
    const SpTask& t = g.tasks[i];
    if (t.op == SP_OP_ATTENTION && t.layer < p.n_layers && !f.layers[t.layer].attention)
      f.layers[t.layer].attention = &t, f.layers[t.layer].attention_index = i;
  }
  for (uint32_t i = 0; i < g.tasks.size(); ++i) {
    const SpTask& t = g.tasks[i];
    if (t.layer >= p.n_layers) {
      TailTasks& tail = f.tail;
      if (t.op == SP_OP_EMBED && !tail.embed) tail.embed = &t, tail.embed_index = i;
      if (t.op == SP_OP_GEMV && (t.operand[5] & 1u) && !tail.lm_head) tail.lm_head = &t, tail.lm_head_index = i;
      if (t.op == SP_OP_SAMPLE && !tail.sample) tail.sample = &t, tail.sample_index = i;
      continue;
    }
    LayerTasks& lt = f.layers[t.layer];
    const std::string layer = "layer " + std::to_string(t.layer) + ": ";
    if (!lt.attention) {
      fail(layer + "no attention task");
      continue;
    }
    if (t.op == SP_OP_GEMV && t.operand[1] == lt.attention->operand[6]) {  // o_proj as a split GEMV
      if (!lt.o_proj) lt.o_proj = &t, lt.o_proj_index = i, lt.o_split = gemv_split(t.operand[7]);
    } else if (t.op == SP_OP_GEMV_PIECE) {
      if (!lt.o_proj || gemv_piece(t).index < gemv_piece(*lt.o_proj).index)
        lt.o_proj = &t, lt.o_proj_index = i, lt.o_split = gemv_piece(t).split;
    } else if (t.op == SP_OP_GEMV) {
      const SpTask** slot = qkv_slot(g, lt, t);
      if (!slot) fail(layer + "a projection that is neither q, k, v nor o_proj");
      else if (!*slot) *slot = &t;
      if (gemv_split(t.operand[7]).pieces > 1) fail(layer + "q, k or v is split");
    } else if (t.op == SP_OP_MLP) {
      if (!lt.mlp) lt.mlp = &t, lt.mlp_index = i;
    } else if (t.op != SP_OP_ATTENTION) {
      fail(layer + "a " + std::string(sp_opcode_name(t.op) ? sp_opcode_name(t.op) : "unknown") + " task" +
           build_hint(p));
    }
  }
  return f;
}

std::string check(const Graph& g, const Found& f) {
  const SpGraphParams& p = g.params;
  // Before any other reason: no option builds an MoE graph the program could run.
  for (const SpTask& t : g.tasks)
    if (t.op == SP_OP_ROUTER || t.op == SP_OP_EXPERT_GATE_UP || t.op == SP_OP_EXPERT_DOWN)
      return "a " + std::string(sp_opcode_name(t.op)) + " task: the program runs no MoE layers";
  const uint32_t group = p.n_kv_heads ? p.n_heads / p.n_kv_heads : 0;
  if (p.n_layers == 0 || group == 0 || p.head_dim == 0 || p.hidden == 0 || p.hidden * 2ull > kRingChunkBytes)
    return "no layers, heads or head dims, or a hidden size of " + std::to_string(p.hidden) +
           " whose rows do not fit a " + std::to_string(kRingChunkBytes >> 10) + "-KiB ring chunk";
  if (p.n_kv_heads != kClusterRanks)
    return std::to_string(p.n_kv_heads) + " kv heads; the program has one cluster of " +
           std::to_string(kClusterRanks) + " blocks a kv head and runs 8 of them";
  if (p.attn_chunks != kClusterRanks) return "attention is in " + std::to_string(p.attn_chunks) + " chunks, not 8 (--tune attn-chunks=8)";
  if (p.attn_q_splits != 1)
    return "attention's q heads are split in " + std::to_string(p.attn_q_splits) + " a kv head (--tune attn-q-splits=1)";
  const uint32_t H = p.hidden, D = p.head_dim, rank_rows = (group + 2) * D / kClusterRanks;
  // The weight ring's chunks hold whole rows of H (q/k/v, gate, up, LM head), whole rows of a
  // head group's G*D columns (o_proj), and a rank's rows lie in one of q, k and v.
  if (H % kSharedDotSpan || kRingChunkBytes % (H * 2))
    return "the hidden size " + std::to_string(H) + " is not a multiple of " + std::to_string(kSharedDotSpan) +
           " that divides " + std::to_string(kRingChunkBytes / 2);
  const uint32_t row_chunk = kRingChunkBytes / (H * 2);
  if ((group + 2) * D % kClusterRanks || rank_rows % row_chunk || D % rank_rows)
    return "a kv head's q, k and v rows do not cut into 8 ranks of whole " + std::to_string(kRingChunkBytes >> 10) +
           "-KiB chunks within one of q, k and v";
  if (group * D % kDotBlock || kRingChunkBytes % (group * D * 2) || H / kClusterRanks * group * D * 2 % kRingChunkBytes)
    return "a rank's o_proj rows over a kv head's columns do not fill whole " + std::to_string(kRingChunkBytes >> 10) +
           "-KiB chunks";
  if (!f.problem.empty()) return f.problem;
  if (!f.tail.embed || !f.tail.lm_head || !f.tail.sample) return "no embed, LM head (argmax) or sample task";
  if (gemv_split(f.tail.lm_head->operand[7]).pieces > 1) return "the LM head is split";
  if (g.views[f.tail.lm_head->operand[0]].row_stride != H) return "the LM head's rows are apart by more than their length";
  const uint64_t V = p.vocab, Hq = p.n_heads, Hkv = p.n_kv_heads;
  const SpView& logits = g.views[f.tail.lm_head->operand[3]];
  if (!bulk_readable(g, f.tail.lm_head->operand[0], V, H) || f.tail.lm_head->operand[2] == SP_NO_VIEW ||
      !bulk_readable(g, f.tail.lm_head->operand[2], 1, H) || logits.dtype != SP_F32 ||
      uint64_t(logits.rows) * logits.cols < V)
    return "the LM head is not the vocabulary's rows of the hidden size on 16 bytes, normalised, into f32 logits";
  if (g.views[f.tail.embed->operand[0]].rows < V || !bulk_readable(g, f.tail.embed->operand[0], V, H))
    return "the embedding is not the vocabulary's rows of the hidden size on 16 bytes";
  const LayerTasks& first = f.layers[0];
  const uint32_t o_stride = g.views[first.o_proj->operand[0]].row_stride;
  const uint32_t kv_stride = g.views[first.attention->operand[3]].row_stride;
  const MlpShape s0 = mlp_shape(*first.mlp, g.views[first.mlp->operand[2]]);
  const uint32_t hidden = f.tail.embed->operand[1];
  for (uint32_t l = 0; l < p.n_layers; ++l) {
    const LayerTasks& lt = f.layers[l];
    const std::string layer = "layer " + std::to_string(l) + ": ";
    if (!lt.attention || !lt.q || !lt.k || !lt.v || !lt.o_proj || !lt.mlp)
      return layer + "not q, k, v, attention, o_proj and an MLP gang" + build_hint(p);
    if (lt.o_split.pieces != p.n_kv_heads || lt.o_split.group != p.n_kv_heads)
      return layer + "o_proj is not split into one piece a kv head in one group (--tune o-proj-split=" +
             std::to_string(p.n_kv_heads) + ")";
    for (const SpTask* t : {lt.q, lt.k, lt.v})
      if (!same_place(g, t->operand[1], hidden) || t->operand[2] == SP_NO_VIEW)
        return layer + "q, k and v do not normalise the hidden state";
    for (const uint32_t v : {lt.q->operand[0], lt.k->operand[0], lt.v->operand[0], lt.mlp->operand[0], lt.mlp->operand[1]})
      if (g.views[v].row_stride != H) return layer + "'" + g.view_names[v] + "' has rows apart by more than their length";
    const uint32_t o_residual = lt.o_proj->op == SP_OP_GEMV ? lt.o_proj->operand[4] : lt.o_proj->operand[3];
    if (o_residual == SP_NO_VIEW || !same_place(g, o_residual, hidden)) return layer + "o_proj does not add the hidden state";
    const MlpShape s = mlp_shape(*lt.mlp, g.views[lt.mlp->operand[2]]);
    if (s.width != kClusterRanks) return layer + "MLP gangs of " + std::to_string(s.width) + ", not 8 (--tune fused-mlp=PIECES/8)";
    if (s.piece > 64 || s.piece % row_chunk || kRingChunkBytes % (s.piece * 2) || kRingChunkBytes / (s.piece * 2) % 32 ||
        H * s.piece * 2 % kRingChunkBytes)
      return layer + "MLP pieces of " + std::to_string(s.piece) + " columns; the program takes at most 64, a multiple of " +
             std::to_string(row_chunk) + " whose down block fills whole " + std::to_string(kRingChunkBytes >> 10) +
             "-KiB chunks of rows in 32s";
    if (s.gangs > kClusterMaxGangs)
      return layer + std::to_string(s.gangs) + " MLP gangs; the program takes " + std::to_string(kClusterMaxGangs) + " at most";
    if (!same_place(g, lt.mlp->operand[3], hidden)) return layer + "the MLP does not update the hidden state";
    // The program reads every layer as layer 0's shapes and strides say.
    if (s.H != H || s.piece != s0.piece || s.gangs != s0.gangs)
      return layer + "the MLP's shape is not layer 0's, over the hidden size";
    if (g.views[lt.o_proj->operand[0]].row_stride != o_stride || g.views[lt.attention->operand[3]].row_stride != kv_stride)
      return layer + "o_proj's or the KV cache's rows are not as far apart as layer 0's";
    const bool readable = bulk_readable(g, lt.q->operand[0], Hq * D, H) && bulk_readable(g, lt.k->operand[0], Hkv * D, H) &&
                          bulk_readable(g, lt.v->operand[0], Hkv * D, H) &&
                          bulk_readable(g, lt.o_proj->operand[0], H, Hq * D) &&
                          bulk_readable(g, lt.mlp->operand[0], s.I, H) && bulk_readable(g, lt.mlp->operand[1], s.I, H) &&
                          bulk_readable(g, lt.mlp->operand[2], H, s.I);
    if (!readable) return layer + "a weight is not its rows of the graph's dimensions on 16 bytes within its arena";
  }
  return "";
}

template <class T>
T* address(const Graph& g, const std::vector<uint8_t*>& bases, uint32_t v) {
  return reinterpret_cast<T*>(bases[g.views[v].arena] + view_begin(g, v));
}

// The graph's tasks for the program; throws with check's reason when it cannot run them.
Found checked_tasks(const Graph& g) {
  Found f = find_tasks(g);
  if (const std::string why = check(g, f); !why.empty())
    throw Error("cuda executor: the graph cannot run as the cluster program: " + why);
  return f;
}

}  // namespace

std::string cluster_program_problem(const Graph& g) { return check(g, find_tasks(g)); }

ClusterPlan plan_cluster_program(const Graph& g, const std::vector<uint8_t*>& bases) {
  const Found f = checked_tasks(g);
  const SpGraphParams& p = g.params;
  ClusterPlan plan;
  for (const LayerTasks& lt : f.layers) {
    const SpTask &a = *lt.attention, &m = *lt.mlp;
    ClusterLayer L{};
    L.wq = address<const bf16>(g, bases, lt.q->operand[0]);
    L.wk = address<const bf16>(g, bases, lt.k->operand[0]);
    L.wv = address<const bf16>(g, bases, lt.v->operand[0]);
    L.wo = address<const bf16>(g, bases, lt.o_proj->operand[0]);  // the first piece's columns, or the whole row
    L.wg = address<const bf16>(g, bases, m.operand[0]);
    L.wu = address<const bf16>(g, bases, m.operand[1]);
    L.wd = address<const bf16>(g, bases, m.operand[2]);
    L.in_norm = address<const bf16>(g, bases, lt.q->operand[2]);
    L.post_norm = address<const bf16>(g, bases, m.operand[4]);
    L.q_norm = address<const bf16>(g, bases, a.operand[1]);
    L.k_norm = address<const bf16>(g, bases, a.operand[2]);
    L.kv = address<bf16>(g, bases, a.operand[3]);
    L.attention_task = lt.attention_index;
    L.o_proj_task = lt.o_proj_index;
    L.mlp_task = lt.mlp_index;
    L.o_proj_counter = lt.o_proj->signal_counter;
    L.mlp_counter = m.signal_counter;
    plan.layers.push_back(L);
  }
  // Strides, the RoPE table and the MLP's shape: the builder gives every layer the same.
  ClusterProgram& c = plan.program;
  const LayerTasks& first = f.layers[0];
  plan.o_stride = g.views[first.o_proj->operand[0]].row_stride;
  c.kv_stride = g.views[first.attention->operand[3]].row_stride;
  c.rope_stride = g.views[first.attention->operand[4]].row_stride;
  c.rope = address<const bf16>(g, bases, first.attention->operand[4]);
  const MlpShape s = mlp_shape(*first.mlp, g.views[first.mlp->operand[2]]);
  c.mlp_piece = s.piece;
  c.mlp_gangs = s.gangs;
  c.params = p;
  const TailTasks& t = f.tail;
  c.embed = address<const bf16>(g, bases, t.embed->operand[0]);
  c.embed_stride = g.views[t.embed->operand[0]].row_stride;
  c.lm_head = address<const bf16>(g, bases, t.lm_head->operand[0]);
  c.final_norm = address<const bf16>(g, bases, t.lm_head->operand[2]);
  c.logits = address<float>(g, bases, t.lm_head->operand[3]);
  c.forced_tokens = address<const uint32_t>(g, bases, t.sample->operand[3]);
  c.out_tokens = address<uint32_t>(g, bases, t.sample->operand[4]);
  c.state = reinterpret_cast<SpStepState*>(bases[SP_ARENA_STATE]);
  c.embed_task = t.embed_index;
  c.lm_head_task = t.lm_head_index;
  c.sample_task = t.sample_index;
  c.sample_counter = t.sample->signal_counter;
  return plan;
}

std::vector<uint32_t> cluster_trace_tasks(const Graph& g, uint32_t clusters) {
  const Found f = checked_tasks(g);
  const SpGraphParams& p = g.params;
  const uint32_t L = p.n_layers, blocks = clusters * kClusterRanks, H = p.hidden, D = p.head_dim;
  const uint32_t G = p.n_heads / p.n_kv_heads, rank_rows = (G + 2) * D / kClusterRanks;
  const MlpShape s = mlp_shape(*f.layers[0].mlp, g.views[f.layers[0].mlp->operand[2]]);
  const uint32_t mlp_first = clusters - s.gangs;
  std::vector<std::vector<uint32_t>> by_layer(L + 1);  // the tail's last
  for (uint32_t i = 0; i < g.tasks.size(); ++i) by_layer[std::min(g.tasks[i].layer, L)].push_back(i);
  // The first task of `layer` (L: the tail) that `is` accepts, or SP_NO_TASK.
  const auto first = [&](uint32_t layer, auto is) {
    const std::vector<uint32_t>& tasks = by_layer[layer];
    const auto at = std::find_if(tasks.begin(), tasks.end(), [&](uint32_t i) { return is(g.tasks[i]); });
    return at == tasks.end() ? SP_NO_TASK : *at;
  };
  const auto covers = [](const SpTask& t, uint32_t row) { return t.tile_begin <= row && row < t.tile_end; };
  std::vector<uint32_t> tasks(cluster_trace_records(L, blocks), SP_NO_TASK);
  const auto at = [&](uint32_t layer, uint32_t block, ClusterPhase phase) -> uint32_t& {
    return tasks[cluster_trace_record(0, L, layer, block, blocks, phase)];
  };
  for (uint32_t l = 0; l < L; ++l) {
    const LayerTasks& lt = f.layers[l];
    for (uint32_t block = 0; block < blocks; ++block) {
      const uint32_t c = block / kClusterRanks, r = block % kClusterRanks;
      if (c < p.n_kv_heads) {
        const uint32_t gr = r * rank_rows;  // the rank's first row of the head's q | k | v, in q, k or v
        const SpTask* out = gr < G * D ? lt.q : gr < (G + 1) * D ? lt.k : lt.v;
        const uint32_t row = gr < G * D ? c * G * D + gr : c * D + (gr - G * D) % D;
        at(l, block, kPhaseQkv) = first(l, [&](const SpTask& t) {
          return t.op == SP_OP_GEMV && t.operand[3] == out->operand[3] && covers(t, row);
        });
        at(l, block, kPhaseAttention) = first(l, [&](const SpTask& t) {
          return t.op == SP_OP_ATTENTION && t.tile_begin == c * p.attn_chunks + r;
        });
        at(l, block, kPhaseOProj) = first(l, [&](const SpTask& t) {  // find_tasks' o_proj: a split GEMV or pieces
          const bool o_proj = t.op == SP_OP_GEMV ? t.operand[1] == lt.attention->operand[6]
                                                 : t.op == SP_OP_GEMV_PIECE && gemv_piece(t).index == c;
          return o_proj && covers(t, r * (H / kClusterRanks));
        });
      }
      if (c >= mlp_first)
        at(l, block, kPhaseMlp) = first(l, [&](const SpTask& t) {
          return t.op == SP_OP_MLP && t.tile_begin == ((c - mlp_first) * kClusterRanks + r) * s.piece;
        });
    }
  }
  for (uint32_t block = 0; block < blocks; ++block) {
    const LmRows lm = cluster_lm_rows(p.vocab, block, blocks);
    if (lm.rows)
      at(0, block, kPhaseLmHead) = first(L, [&](const SpTask& t) {
        return t.op == f.tail.lm_head->op && t.operand[0] == f.tail.lm_head->operand[0] && covers(t, lm.first);
      });
    at(0, block, kPhaseSample) = f.tail.sample_index;
  }
  return tasks;
}

}  // namespace spindle::cuda

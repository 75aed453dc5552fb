#include "host/models/attention_block.h"

#include <algorithm>
#include <string>

#include "host/models/tensor_names.h"
#include "tasks/gemv_piece.h"

namespace spindle {

AttentionBlock::AttentionBlock(GraphEmitter& e, const DecoderViews& v)
    : e_(e), v_(v), gated_(is_hybrid(e.weights().config.family)) {
  const ModelConfig& c = e.weights().config;
  const BuildOptions& opt = e.options();
  const SpGraphParams& p = e.graph().params;
  const uint32_t H = c.hidden, Hq = c.n_heads, Hkv = c.n_kv_heads, D = c.head_dim;
  q_rows_ = narrow(uint64_t(Hq) * D, "num_attention_heads × head_dim");
  q_proj_rows_ = narrow(uint64_t(gated_ ? 2 : 1) * q_rows_, "q_proj's rows, each q head's query and gate");
  kv_rows_ = narrow(uint64_t(Hkv) * D, "num_key_value_heads × head_dim");
  qkv_rows_ = narrow(uint64_t(q_proj_rows_) + 2 * uint64_t(kv_rows_), "q_proj's, k_proj's and v_proj's rows");
  const uint32_t chunks = p.attn_chunks;
  kv_head_tiles_ = p.attn_q_splits * chunks;  // <= group × chunks: within the partials' rows below
  kv_cache_rows_ = narrow(2 * uint64_t(Hkv) * p.context, "a layer's KV cache rows, 2 × num_key_value_heads (" +
                                                             std::to_string(Hkv) + ") × context (" +
                                                             std::to_string(p.context) + ")");
  const uint32_t partial_rows =
      narrow(uint64_t(Hq) * chunks, "the attention partials' rows, num_attention_heads (" + std::to_string(Hq) +
                                        ") × attention chunks (" + std::to_string(chunks) + ")");
  e.check_split(opt.o_proj_split, q_rows_, "o_proj");
  if (opt.devices > 1)
    e.check_split({opt.devices, opt.devices}, q_rows_, ("o_proj over " + std::to_string(opt.devices) + " devices,").c_str());

  qkv_ = e.alloc("qkv", SP_ARENA_WORK, SP_BF16, 1, qkv_rows_);
  q_part_ = e.slice(qkv_, "qkv.q", 0, q_proj_rows_);
  k_part_ = e.slice(qkv_, "qkv.k", q_proj_rows_, kv_rows_);
  v_part_ = e.slice(qkv_, "qkv.v", uint64_t(q_proj_rows_) + kv_rows_, kv_rows_);
  partials_ = e.alloc("attn_partials", SP_ARENA_WORK, SP_F32, partial_rows, uint64_t(D) + 2);
  attn_out_ = e.alloc("attn_out", SP_ARENA_WORK, SP_BF16, 1, q_rows_);
  arrivals_ = e.alloc("attn_arrivals", SP_ARENA_WORK, SP_U32, 1, uint64_t(Hkv) * p.attn_q_splits);
  // o_proj as pieces a kv head (BuildOptions::kv_head_waits with an o_proj split a kv head).
  o_split_word_ = gemv_split_word(opt.o_proj_split.pieces, opt.o_proj_split.group);
  o_pieces_ = opt.kv_head_waits && Hkv > 1 && gemv_split(o_split_word_).pieces == Hkv;
  o_piece_rows_ = opt.rows_per_tile ? opt.rows_per_tile : rows_per_task_for(H, std::max(1u, opt.stage_tasks / Hkv));
  if (!o_pieces_) return;
  const uint64_t o_words = ceil_div(H, o_piece_rows_);
  check_at_most(o_words, kMaxSlots,
                "o_proj's arrivals words, hidden_size (" + std::to_string(H) + ") / rows per task (" +
                    std::to_string(o_piece_rows_) + ") rounded up",
                "a piece task can name (raise rows_per_tile)");
  o_partials_ = e.alloc("o_proj_partials", SP_ARENA_WORK, SP_F32, Hkv, H);
  o_arrivals_ = e.alloc("o_proj_arrivals", SP_ARENA_WORK, SP_U32, 1, o_words);
}

void AttentionBlock::tensors(const ModelConfig& c, uint32_t l, std::vector<TensorSpec>& out) {
  const uint64_t H = c.hidden, D = c.head_dim, q = uint64_t(c.n_heads) * D, kv = uint64_t(c.n_kv_heads) * D;
  using namespace names;
  out.push_back({layer(l, kInputNorm), {H}});
  out.push_back({layer(l, kQProj), {(is_hybrid(c.family) ? 2 : 1) * q, H}});
  out.push_back({layer(l, kKProj), {kv, H}});
  out.push_back({layer(l, kVProj), {kv, H}});
  out.push_back({layer(l, kOProj), {H, q}});
  out.push_back({layer(l, kQNorm), {D}});
  out.push_back({layer(l, kKNorm), {D}});
}

Stage AttentionBlock::emit(uint32_t l, const Stage& prev) {
  using namespace names;
  const ModelConfig& c = e_.weights().config;
  const BuildOptions& opt = e_.options();
  const uint32_t H = c.hidden, Hkv = c.n_kv_heads, D = c.head_dim;
  const std::string tag = layer_tag(l);
  const uint32_t h = v_.hidden;
  const uint32_t in_norm = e_.weight(layer(l, kInputNorm), {H});
  const uint32_t wq = e_.weight(layer(l, kQProj), {q_proj_rows_, H});
  const uint32_t wk = e_.weight(layer(l, kKProj), {kv_rows_, H});
  const uint32_t wv = e_.weight(layer(l, kVProj), {kv_rows_, H});
  const uint32_t wo = e_.weight(layer(l, kOProj), {H, q_rows_});
  const uint32_t qn = e_.weight(layer(l, kQNorm), {D});
  const uint32_t kn = e_.weight(layer(l, kKNorm), {D});
  const uint32_t kv_cache = e_.alloc(tag + "kv_cache", SP_ARENA_KV, SP_BF16, kv_cache_rows_, D);

  // q, k and v: one stage, or with kv_head_waits one a kv head g holding the rows of g's q
  // heads (with their gates), k and v, so that g's attention waits for those alone. Over N
  // devices, device d computes the rows of its kv heads, Hkv / N of them; over more devices
  // than kv heads, the rows of its share of a kv head's q heads and that head's k and v rows,
  // which each of the `share` devices holding the head computes alike.
  std::vector<Stage> s_qkv;
  const uint32_t N = e_.graph().devices, heads = opt.kv_head_waits ? Hkv : 1;
  const uint32_t share = std::max(1u, e_.graph().params.attn_kv_share);
  const uint32_t parts = std::max(heads, N);  // build_graph refuses kv_head_waits over devices
  const uint32_t qd = q_proj_rows_ / parts, kd = kv_rows_ / (parts / share);
  const uint32_t qkv_per = opt.kv_head_waits ? e_.head_rows_per_task(qd, kd, heads) : e_.rows_per_task(qd + 2 * kd);
  for (uint32_t g = 0; g < parts; ++g) {
    if (g == 0 || opt.kv_head_waits)
      s_qkv.push_back(e_.begin_stage(tag + "qkv" + (opt.kv_head_waits ? ".kv" + std::to_string(g) : "")));
    if (N > 1) e_.on_device(g);
    const uint32_t k0 = g / share * kd;
    e_.gemv(s_qkv.back(), prev, l, wq, g * qd, (g + 1) * qd, qkv_per, h, in_norm, q_part_, SP_NO_VIEW);
    e_.gemv(s_qkv.back(), prev, l, wk, k0, k0 + kd, qkv_per, h, in_norm, k_part_, SP_NO_VIEW);
    e_.gemv(s_qkv.back(), prev, l, wv, k0, k0 + kd, qkv_per, h, in_norm, v_part_, SP_NO_VIEW);
  }

  // One task per (kv head, q-head split, chunk): q/k norms, RoPE, the KV append, attention and
  // the merge; one stage, or with o_proj in pieces a kv head one a kv head. Over N devices, on
  // the device of its q heads' rows.
  std::vector<Stage> s_attn;
  const uint32_t splits = e_.graph().params.attn_q_splits, chunks = kv_head_tiles_ / splits;
  for (uint32_t g = 0; g < Hkv; ++g) {
    if (g == 0 || o_pieces_) {
      s_attn.push_back(e_.begin_stage(tag + "attention" + (o_pieces_ ? ".kv" + std::to_string(g) : "")));
      e_.reserve_tasks(o_pieces_ ? kv_head_tiles_ : uint64_t(Hkv) * kv_head_tiles_, s_attn.back());
    }
    // Tiles below Hkv × splits × chunks <= Hq × chunks, the partials' 32-bit rows.
    for (uint32_t t = g * kv_head_tiles_; t < (g + 1) * kv_head_tiles_; ++t) {
      if (N > 1) e_.on_device(share > 1 ? g * share + t / chunks % splits / (splits / share) : g / (Hkv / N));
      e_.add_task(s_attn.back(), s_qkv[opt.kv_head_waits ? g : 0], SP_WAIT_SAME_STEP,
                  gated_ ? SP_OP_GATED_ATTENTION : SP_OP_ATTENTION, l, t, t + 1,
                  {qkv_, qn, kn, kv_cache, v_.rope, partials_, attn_out_, arrivals_});
    }
  }

  e_.on_device(Graph::kEveryDevice);
  if (N > 1) return e_.row_parallel(tag + "o_proj", s_attn[0], l, wo, attn_out_, h, h);
  // o_proj: rows of whole dots, or pieces a kv head g over g's columns waiting for g's attention.
  Stage s_o = e_.begin_stage(tag + "o_proj");
  if (o_pieces_) {
    const uint32_t P = q_rows_ / Hkv;
    for (uint32_t g = 0; g < Hkv; ++g) {
      const std::string kv = ".kv" + std::to_string(g);
      const uint32_t w_g = e_.columns(wo, layer(l, kOProj) + kv, g * P, P);
      const uint32_t x_g = e_.slice(attn_out_, "attn_out" + kv, g * P, P);
      e_.split(s_o, 0, H, o_piece_rows_, [&](uint32_t r0, uint32_t r1) {
        e_.add_task(s_o, s_attn[g], SP_WAIT_SAME_STEP, SP_OP_GEMV_PIECE, l, r0, r1,
                    {w_g, x_g, h, h, o_partials_, o_arrivals_, gemv_piece_word(g, r0 / o_piece_rows_), o_split_word_});
      });
    }
  } else {
    e_.gemv(s_o, s_attn[0], l, wo, 0, H, e_.rows_per_task(H), attn_out_, SP_NO_VIEW, h, h, opt.o_proj_split);
  }
  return s_o;
}

}  // namespace spindle

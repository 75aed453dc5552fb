#include "host/graph_builder.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "host/graph_emitter.h"
#include "host/models/families.h"
#include "tasks/error.h"

namespace spindle {
namespace {

Graph build_graph(const ModelWeights& w, const BuildOptions& opt) {
  const ModelConfig& c = w.config;
  // The config's limits keep each dimension, and so a layer's rows, within 32 bits; a config
  // built in code has not met them yet.
  validate(c, w.source);
  GraphEmitter e(w, opt);
  Graph& g = e.graph();
  const uint32_t H = c.hidden, Hkv = c.n_kv_heads, V = c.vocab;
  const uint32_t ctx = opt.context ? opt.context : c.max_position;
  if (opt.context > c.max_position)
    throw Error("context " + std::to_string(opt.context) + " exceeds the model's limit " +
                std::to_string(c.max_position) + " (max_position_embeddings)");
  if (opt.rows_per_tile == 0 && opt.stage_tasks == 0)
    throw Error("stage_tasks must be at least 1 (or rows_per_tile given)");
  const uint32_t chunks = opt.attn_chunks ? opt.attn_chunks : attn_chunks_for_context(ctx, Hkv);
  if (chunks > ctx)
    throw Error("attention chunks " + std::to_string(chunks) + " exceed the context's " + std::to_string(ctx) +
                " positions");
  if (opt.devices == 0 || opt.devices > Graph::kMaxDevices)
    throw Error("devices " + std::to_string(opt.devices) + ": from 1 to " + std::to_string(Graph::kMaxDevices));
  if (opt.expert_parallel && opt.devices < 2)
    throw Error("expert parallel splits the routed experts over devices: it needs devices above 1");
  if (opt.expert_parallel && !c.num_experts)
    throw Error(std::string("expert parallel splits the routed experts over devices, and a ") + family_name(c.family) +
                " model has none");
  if (opt.shared_down_split.pieces && !has_shared_expert(c.family))
    throw Error(std::string("a shared expert down split, and a ") + family_name(c.family) +
                " model has no shared expert");
  if (opt.devices > 1) {
    const std::string over = " does not apply over " + std::to_string(opt.devices) + " devices";
    if (Hkv % opt.devices && opt.devices % Hkv)
      throw Error(std::to_string(opt.devices) + " devices: a device holds whole kv heads, or a kv head's q heads are "
                  "shared by devices alike, and the model's " + std::to_string(Hkv) +
                  " (num_key_value_heads) neither split evenly over them nor divide them");
    if (opt.kv_head_waits) throw Error("kv_head_waits, a schedule of one device's stages," + over);
    if (opt.fused_mlp.pieces > 1) throw Error("the fused MLP (one device's gangs)" + over);
    if (opt.o_proj_split.pieces > 1 || opt.down_split.pieces > 1 || opt.gdn_out_split.pieces > 1 ||
        opt.expert_down_split.pieces > 1 || opt.shared_down_split.pieces)
      throw Error("an o_proj, down, GDN out_proj, expert down or shared expert down split" + over +
                  ": there each dot is split into a piece a device");
  }
  const uint32_t group = c.n_heads / Hkv;  // validate(c) checked that it divides
  // Over more devices than kv heads, each kv head's q-head splits are shared by `share` devices.
  const uint32_t share = attn_kv_share_for(opt.devices, Hkv);
  if (group % share)
    throw Error(std::to_string(opt.devices) + " devices: each of the " + std::to_string(Hkv) +
                " kv heads' q heads are shared by " + std::to_string(share) + " devices, and a kv head's " +
                std::to_string(group) + " q heads (num_attention_heads / num_key_value_heads) do not split evenly "
                "over them");
  const uint32_t fit = attn_q_splits_for(chunks, c.n_heads, Hkv);
  const uint32_t q_splits = opt.attn_q_splits ? opt.attn_q_splits : fit % share ? share : fit;
  if (group % q_splits)
    throw Error("attention q-head splits " + std::to_string(q_splits) + " do not divide a kv head's " +
                std::to_string(group) + " q heads (num_attention_heads / num_key_value_heads)");
  if (q_splits % share)
    throw Error("attention q-head splits " + std::to_string(q_splits) + ": over " + std::to_string(opt.devices) +
                " devices each kv head's splits are shared by " + std::to_string(share) +
                " devices, which must divide them");
  const uint32_t max_steps = opt.max_steps ? opt.max_steps : ctx;
  if (max_steps > ctx)
    throw Error("max_steps " + std::to_string(max_steps) + " exceeds the context's " + std::to_string(ctx) +
                " positions (each step takes one)");
  // The LM head's rows: over N devices device d computes [d·Vd, (d+1)·Vd) of them, Vd = V/N
  // rounded up, into the symmetric logits and argmax slots, which every device's sampler reads.
  const uint32_t N = opt.devices, Vd = uint32_t(ceil_div(V, N));
  const auto vocab_rows = [&](uint32_t d) {
    return std::pair<uint32_t, uint32_t>(std::min<uint64_t>(V, uint64_t(d) * Vd), std::min<uint64_t>(V, uint64_t(d + 1) * Vd));
  };
  const uint32_t lm_rows = e.rows_per_task(Vd);
  uint64_t slots = 0;
  for (uint32_t d = 0; d < N; ++d) slots += ceil_div(vocab_rows(d).second - vocab_rows(d).first, lm_rows);
  check_at_most(slots, kMaxSlots,
                "the LM head's tasks, vocab_size (" + std::to_string(V) + ") / rows per task (" +
                    std::to_string(lm_rows) + ") rounded up",
                "argmax slots its tasks can name (raise rows_per_tile or lower stage_tasks)");

  g.model = w.source;
  SpGraphParams& p = g.params;
  p.hidden = H;
  p.n_layers = c.n_layers;
  p.n_heads = c.n_heads;
  p.n_kv_heads = Hkv;
  p.head_dim = c.head_dim;
  p.rotary_dim = c.rotary_dim();
  p.intermediate = c.intermediate;
  p.vocab = V;
  p.context = ctx;
  p.attn_chunks = chunks;
  p.attn_q_splits = q_splits;
  p.attn_kv_share = share > 1 ? share : 0;
  p.norm_kind = is_hybrid(c.family) ? SP_NORM_ZERO_CENTRED : SP_NORM_STANDARD;
  p.rms_eps = c.rms_eps;
  p.rope_theta = c.rope_theta;
  p.max_steps = max_steps;

  g.arenas = {{"state", SP_STATE_FORCED_OFFSET}, {"work", 0}, {"kv", 0}, {"const", 0}, {"recurrent", 0}, {"symmetric", 0}};
  for (const HostArena& a : w.arenas) g.arenas.push_back({"weights:" + a.name, a.bytes});

  g.io.forced_tokens = e.add_view("forced_tokens", SP_ARENA_STATE, SP_U32, SP_STATE_FORCED_OFFSET, 1, max_steps);
  g.io.out_tokens = e.add_view("out_tokens", SP_ARENA_STATE, SP_U32,
                               SP_STATE_FORCED_OFFSET + uint64_t(max_steps) * 4, 1, max_steps);
  g.arenas[SP_ARENA_STATE].bytes = SP_STATE_FORCED_OFFSET + uint64_t(max_steps) * 8;

  const DecoderViews views{e.alloc("h", SP_ARENA_WORK, SP_BF16, 1, H),
                           e.alloc("rope_table", SP_ARENA_CONST, SP_BF16, ctx, p.rotary_dim)};
  const std::unique_ptr<DecoderLayers> layers = family_model(c.family).layers(e, views);
  const uint32_t sampled = N > 1 ? SP_ARENA_SYMMETRIC : SP_ARENA_WORK;  // the logits and argmax slots
  g.io.logits = e.alloc("logits", sampled, SP_F32, 1, V);
  const uint32_t embed_w = e.weight(names::kEmbed, {V, H});

  // The first stage waits for the previous step's sampler; its counter is the last one.
  Stage sample_stage{0, 1};
  Stage embed = e.begin_stage("embed");
  const uint32_t sample_counter_slot = uint32_t(g.tasks.size());
  e.add_task(embed, sample_stage, SP_WAIT_PREV_STEP, SP_OP_EMBED, kLayerNone, 0, H, {embed_w, views.hidden});

  Stage prev = embed;
  for (uint32_t l = 0; l < c.n_layers; ++l) prev = layers->emit(l, prev);

  const uint32_t final_norm = e.weight(names::kFinalNorm, {H});
  const uint32_t lm = e.weight(names::kLmHead, {V, H});
  const uint32_t argmax = e.alloc("argmax_partials", sampled, SP_U32, slots, 2);
  Stage s_lm = e.begin_stage("lm_head", N > 1);
  uint32_t slot = 0;  // in row order: the argmax's ties go to the earlier slot, the lower row
  for (uint32_t d = 0; d < N; ++d) {
    if (N > 1) e.on_device(d);
    e.split(s_lm, vocab_rows(d).first, vocab_rows(d).second, lm_rows, [&](uint32_t r0, uint32_t r1) {
      const uint32_t flags = 1u | (slot++ << 16);
      e.add_task(s_lm, prev, SP_WAIT_SAME_STEP, SP_OP_GEMV, kLayerNone, r0, r1,
                 {lm, views.hidden, final_norm, g.io.logits, SP_NO_VIEW, flags, argmax, 0u});
    });
  }
  e.on_device(Graph::kEveryDevice);

  // Over several devices the samplers' signals reach every device, so that no device starts a
  // step before every device has ended the last: then no device writes an exchange's partials
  // (host/graph_emitter.h row_parallel) while another still reads them a step behind.
  Stage s_sample = e.begin_stage("sample", opt.devices > 1);
  e.add_task(s_sample, s_lm, SP_WAIT_SAME_STEP, SP_OP_SAMPLE, kLayerNone, 0, 1,
             {g.io.logits, argmax, uint32_t(slots), g.io.forced_tokens, g.io.out_tokens});

  g.tasks[sample_counter_slot].wait_counter = s_sample.counter;
  g.tasks[sample_counter_slot].wait_count = s_sample.tasks;
  // Executors bind every arena: none is empty.
  for (uint32_t a : {SP_ARENA_KV, SP_ARENA_RECURRENT, SP_ARENA_SYMMETRIC}) g.arenas[a].bytes = std::max<uint64_t>(g.arenas[a].bytes, kAlign);
  validate(g);
  return std::move(g);
}

}  // namespace

uint32_t rows_per_task_for(uint32_t rows, uint32_t stage_tasks) {
  constexpr uint64_t multiple = 8;
  // The largest multiple of 8 in 32 bits bounds it: rows near 2^32 take two tasks, not zero rows each.
  const uint64_t per = align_up(std::max(multiple, ceil_div(rows, stage_tasks)), multiple);
  return uint32_t(std::min(per, kMaxU32 / multiple * multiple));
}

uint32_t attn_chunks_for_context(uint32_t context, uint32_t kv_heads) {
  const uint64_t most = std::max(1u, 128 / std::max(1u, kv_heads));
  return uint32_t(std::clamp<uint64_t>(ceil_div(context, 256), 1, most));
}

uint32_t attn_q_splits_for(uint32_t chunks, uint32_t n_heads, uint32_t kv_heads) {
  if (chunks != 1 || kv_heads == 0) return 1;
  const uint32_t group = n_heads / kv_heads;
  uint32_t splits = 1;
  for (uint32_t s = 1; s <= group && uint64_t(kv_heads) * s <= 128; ++s)
    if (group % s == 0) splits = s;
  return splits;
}

uint32_t gdn_gang_for(uint32_t value_heads, uint32_t value_dim) {
  uint32_t members = 1;
  for (uint32_t m = 1; m <= 255 && value_dim / m >= 16 && uint64_t(value_heads) * m <= 128; ++m)
    if (value_dim % m == 0) members = m;
  return members;
}

Graph build_decode_graph(const ModelWeights& w, const BuildOptions& opt) { return build_graph(w, opt); }

}  // namespace spindle

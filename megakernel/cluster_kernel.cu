// The cluster program (cluster_program.h): each decode step's layers in two global hops.
//
// Block (cluster c, rank r) of `clusters` clusters of 8 keeps its own copy of the hidden state
// and, each layer:
//  * front (c < 8, kv head c): normalises h, computes its (G+2)D/8 q, k, v rows and pushes them
//    into its 7 peers' shared memory (st.async, completing on the peer's mbarrier); then, with
//    the head's q, k and v, attention over chunk r of the positions, its partial rows pushed the
//    same way; every rank merges all of them (same bits wherever merged) and computes o_proj's
//    piece c (the head's columns) over its H/8 rows, stored as flagged words (value, flag);
//  * every block sums the 8 pieces of its cluster rank's eighth of the rows, in piece order, into
//    h_attn = r(h + r(y)), and pushes them into the 8 ranks' shared memory;
//  * MLP (the last mlp_gangs clusters, piece 8k + r): normalises h_attn, computes its P
//    activations and down's dots over its P columns, pushes each rank's share of the rows to
//    that rank, which sums the gang's 8 in rank order into flagged words;
//  * the next layer's h = r(h_attn + r(sum of the gangs' sums in gang order)), the same way.
// Every weight a block reads (its q/k/v rows, its o_proj block, its gate, up and down pieces,
// its LM head rows) streams through its weight ring (weight_ring.cuh) in the order the block
// reads them, step after step, so a phase's weights have landed before the phase starts unless
// HBM is behind. The words carry the layer in their flag, so no release lies on a layer's path
// (a release waits for the block's bulk operations in flight: docs/two-hop-layer.md). Two sets of words,
// by layer parity, so a word is rewritten only after every block has read it. Once a step:
// the LM head's rows over all blocks, each block's argmax partial stored as flagged words
// (release); every block acquires all of them and chooses the token itself (next_token): that
// orders the step's KV cache rows before the next step's reads. Block 0 records the token.
#include "megakernel/cluster_kernel.h"

#include "megakernel/cuda_check.h"
#include "megakernel/device_atomic.cuh"
#include "megakernel/device_dot.cuh"
#include "megakernel/device_failure.cuh"
#include "megakernel/fast_div.h"
#include "megakernel/ptx.cuh"
#include "megakernel/tile_attention.cuh"
#include "megakernel/tile_layout.h"
#include "megakernel/tile_projection.cuh"
#include "megakernel/weight_ring.cuh"
#include "ops/attention.h"
#include "ops/gemv.h"
#include "ops/norm.h"
#include "ops/sample.h"

namespace spindle::cuda {
namespace {

constexpr uint32_t kThreads = 256;
constexpr uint32_t kMaxPieces = kClusterMaxGangs;  // flagged sources of a row's sum (8 o_proj pieces, the gangs)

// Floats a partial row {m, l, acc[D]} takes in the exchange: whole 16-byte pieces.
__host__ __device__ inline uint32_t partial_stride(uint32_t D) { return (D + 2u + 3u) & ~3u; }

// A layer's weight pieces a block may stream, in the order it reads them.
enum Piece : uint32_t { kQkvPiece, kOPiece, kGatePiece, kUpPiece, kDownPiece, kPieces };

// What a refill reads to find its chunk's source (fill_chunk), in three 16-byte words that it
// loads at once at its entry: each field loaded where it was first needed, after the branch
// before it, put six shared loads one after another on the refilling warp's path (SASS).
struct alignas(16) ChunkIndex {
  // The stream's divisions (by the chunks of a step and of a layer) as multiply-highs: a
  // refill (at the end of its warp's phase) divides at every chunk, so its chain of dependent
  // instructions is on the layer's path.
  FastDiv by_step, by_layer;
  uint32_t total, layers;       // the launch's chunks; a step's chunks of layers
  uint32_t first[kPieces - 1];  // a layer's first chunk of each piece after q/k/v
};
static_assert(sizeof(ChunkIndex) == 48, "three 16-byte loads");

// The chunks a block reads in one step, in the order it reads them: each layer's pieces of its
// roles, then its LM head rows (the ring's stream, weight_ring.cuh).
struct Stream {
  ChunkIndex index;
  uint32_t qkv, o, gate, down;  // a layer's chunks of each piece (up's: gate's); 0 outside the block's roles
  uint32_t per_layer, lm, per_step;
  uint32_t lm_first, lm_rows;  // the block's LM head rows
  uint32_t row_chunk;          // rows of H elements a chunk (q/k/v, gate, up, LM head)
  FastDiv by_slots;  // for_warp_rows finds every chunk's slot: a multiply-high, as ChunkIndex's
};

// What the block's ring streams, in its shared memory (set once by thread 0), so that the code
// that reads and refills the ring takes it by one pointer.
struct StreamState {
  WeightRing ring;
  Stream st;
  const bf16** sources;  // [layer][Piece]: where the block's share of each piece starts
  const bf16* lm_head;
  uint2* deferred;  // [warp][kDeferred]: {chunk, its readers} the warp has read and not released ({~0u, 0}: none)
  uint32_t H;
};

// Releases a warp holds back (defer_release), and how far apart a block with nothing to do
// but wait issues them (release_deferred): warp 7 sleeps 7 times that, which must stay well
// inside the wait (qwen3-0.6b's is ~10 us: 500 and 1000 ns measured alike, 1500 17% slower).
constexpr uint32_t kDeferred = 2;
constexpr uint32_t kRefillStaggerNs = 500;

// The block's mbarriers for what its cluster's peers push into its shared memory: q/k/v rows,
// attention partials, down partials, and the hops' rows (two, by the hop's parity: a peer may
// push the next hop's rows while this block still waits for this one's).
enum Bars : uint32_t { kQkvBar, kPartialBar, kDownBar, kHopBar, kExchangeBars = kHopBar + 2 };

// The program's buffers after attention's tile area, in bytes from the start of dynamic shared
// memory (the tile area must start there: the attention helpers carve it from offset 0).
struct Layout {
  uint32_t h, hattn, xn, norm, heads, qkv, attn_out, act, mine, recv, weights, down, partials, stream, sources,
      deferred, tags, released, bars, ring, end;
};
__host__ __device__ inline Layout layout(const SpGraphParams& p, uint32_t S, uint32_t T, uint32_t slots) {
  const uint32_t G = p.n_heads / p.n_kv_heads, D = p.head_dim, H = p.hidden, ps = partial_stride(D);
  Layout l{};
  // Every buffer from a 128-byte boundary (with the score block a multiple
  // of 16 positions, -0.9% a token at position 1024 and -0.6% at 4096 against 16-byte ones).
  const auto align128 = [](uint32_t bytes) { return (bytes + 127u) & ~127u; };
  uint32_t at = align128(attn_smem_bytes(G, D, p.rotary_dim, S, T, kClusterRanks, ps));
  auto take = [&](uint32_t bytes) {
    const uint32_t here = at;
    at += align128(bytes);
    return here;
  };
  l.h = take(H * 2);
  l.hattn = take(H * 2);
  l.xn = take(H * 2);
  l.norm = take(H * 2);
  l.heads = take((2 * D + p.rotary_dim) * 2);  // the q and k norms' weights, the position's RoPE row (stage_front)
  l.qkv = take((G + 2) * D * 2);
  l.attn_out = take(G * D * 2);
  l.act = take(64 * 2);
  l.mine = take(G * ps * 4);
  l.recv = take(G * kClusterRanks * ps * 4);
  l.weights = take(G * kClusterRanks * 4);
  l.down = take(H * 4);
  l.partials = take(kThreads / 32 * sizeof(ArgmaxPartial));
  l.stream = take(sizeof(StreamState));
  l.sources = take(p.n_layers * kPieces * 8);  // each layer's pieces' first bytes (global addresses)
  l.deferred = take(kThreads / 32 * kDeferred * 8);
  l.tags = take(slots * 4);
  l.released = take(slots * 4);
  l.bars = take((kExchangeBars + slots) * 8);  // the exchanges', then the ring's
  l.ring = at;
  l.end = at + slots * kRingChunkBytes;
  return l;
}
// An MLP-only block's: it runs no attention, so its ring also takes attention's area. On
// qwen3-0.6b at the default K/V staging that is 11 slots where a front block has 8, for 12 chunks
// a layer: with 8, three of its four down chunks were copied during its MLP (-2% a token; 9 and
// 10 slots measured the same as 11, a leaner layout's 12 or 13 2-3% slower).
__host__ __device__ inline Layout mlp_only_layout(const SpGraphParams& p, uint32_t slots) {
  return layout(p, 0, 0, slots);
}

// A wait's bound and what it reports when it outlives it. Its clock starts at the wait's 64th
// poll, not before the wait: most waits end sooner, and they need not read the timer.
struct Watch {
  RunControl* control;
  uint64_t start, bound;
  DeviceFailure timeout;
  uint32_t polls;
  // False once the run was aborted or the wait outlived the bound (reported).
  __device__ bool ok() {
    if (++polls & 63u) return true;
    if (run_aborted(control)) return false;
    const uint64_t now = global_timer_ns();
    if (!start) start = now;
    if (now - start <= bound) return true;
    report_failure(control, timeout);
    return false;
  }
};

__device__ inline Watch watch(const ClusterProgram& p, const ClusterLaunch& l, uint32_t task, uint32_t step,
                              uint32_t counter, uint32_t flag) {
  return {p.control, 0, l.watchdog_ns, {kFailWatchdog, task, step, counter, 0, flag}, 0};
}

__device__ __forceinline__ void store_word(unsigned long long* at, float v, uint32_t flag) {
  const unsigned long long w = (static_cast<unsigned long long>(flag) << 32) | __float_as_uint(v);
  st_relaxed_gpu_u64(at, w);
}
__device__ __forceinline__ unsigned long long load_word(const unsigned long long* at) { return ld_relaxed_gpu_u64(at); }
__device__ __forceinline__ ulonglong2 load_word_pair(const unsigned long long* at) { return ld_relaxed_gpu_v2_u64(at); }
__device__ __forceinline__ bool carries(unsigned long long word, uint32_t flag) { return uint32_t(word >> 32) == flag; }
__device__ __forceinline__ float word_value(unsigned long long word) { return __uint_as_float(uint32_t(word)); }

// Waits, by warp 0, until the word at `words` carries `flag` in all but one of the n pieces
// (piece s's at words + s * H), the first of one writer's share of rows in each: the block then
// reads rows that have most likely landed, rather than every thread polling the L2 while the
// writers work, and polls the last writer's words itself, so that they are read in the round
// trip that sees them (waiting for every writer here put a second round trip on the hop's path).
// Warp 0's answer.
__device__ inline bool await_writers(const unsigned long long* words, uint32_t H, uint32_t n, uint32_t flag, Watch& w) {
  static_assert(kMaxPieces <= 32, "a lane a piece");
  const unsigned long long* at = lane_id() < n ? words + size_t(lane_id()) * H : nullptr;
  unsigned long long v = at ? load_word(at) : 0;
  for (;;) {
    const bool mine = !at || carries(v, flag);
    if (__popc(__ballot_sync(~0u, !mine)) <= 1) return true;
    if (!mine) v = load_word(at);
    if (__any_sync(~0u, !w.ok())) return false;
  }
}

// Sums of two rows' n flagged words (the pair at `at`, piece s's at at + s * stride) once each
// carries `flag`, each from the first piece in order (split_sum's order); every word is loaded
// before any is checked. False: the wait failed.
__device__ inline bool flagged_pair_sums(const unsigned long long* at, size_t stride, uint32_t n, uint32_t flag,
                                         Watch& w, float (&sum)[2]) {
  ulonglong2 v[kMaxPieces];
#pragma unroll
  for (uint32_t s = 0; s < kMaxPieces; ++s)
    if (s < n) v[s] = load_word_pair(at + s * stride);
  for (;;) {
    bool all = true;
#pragma unroll
    for (uint32_t s = 0; s < kMaxPieces; ++s)
      if (s < n && !(carries(v[s].x, flag) && carries(v[s].y, flag))) {
        all = false;
        v[s] = load_word_pair(at + s * stride);
      }
    if (all) break;
    if (!w.ok()) return false;
  }
  sum[0] = word_value(v[0].x);
  sum[1] = word_value(v[0].y);
#pragma unroll
  for (uint32_t s = 1; s < kMaxPieces; ++s)
    if (s < n) {
      sum[0] = sum[0] + word_value(v[s].x);
      sum[1] = sum[1] + word_value(v[s].y);
    }
  return true;
}

__device__ __noinline__ void release_queues_from(const StreamState& s, uint32_t first);  // below, with release_queue

// Starts copying a norm's H weights into the block's norm buffer, where the next norm_into reads
// them: called before a hop's wait, so the copy lands during it.
__device__ inline void stage_norm(const bf16* w, bf16* buffer, uint32_t H) {
  stage_to_shared<Src::Resident>(w, buffer, H);
}

// xn = RMSNorm(x) with the weights stage_norm copied to w, all H elements (docs/numerics.md), by
// the block. The kernel's code is kept to one copy of each phase's (__noinline__ here and
// below): every layer runs all of it, and straight-line code past ~128 KB runs slower;
// 265 → 204 KB of text made a token 16% faster.
// While warp 0 sums the squares, the other warps issue the refills every warp held back
// (`refill`'s queues, release_queues_from): issued just before the norm, on one lane of each
// warp, they took ~0.3 us of the phase's path (marks).
__device__ __noinline__ void norm_into(const bf16* x, const bf16* w, bf16* xn, uint32_t H, float eps, uint32_t kind,
                                       float* scratch, const StreamState& refill) {
  cp_async_wait_all();  // this thread's part of w: the barrier below makes all of it visible
  if (warp_id() == 0) {
    const uint32_t at[1] = {smem_address(x)};
    float sum[1];
    warp_dot_rows_shared<1>(at, at[0], H, sum);  // H is a multiple of kSharedDotSpan (cluster_program_problem)
    const float inv = rms_inverse<float>(sum[0], H, eps);
    if (lane_id() == 0) scratch[0] = inv;
  }
  release_queues_from(refill, 1);
  __syncthreads();
  const float inv = scratch[0];
  // Four elements a thread at a time (8-byte loads and store): four independent chains, where
  // one element a loop trip waited on each of its ~25 dependent instructions in turn.
  with_norm_kind(kind, [&](auto k_kind) {
    for (uint32_t k = 4 * threadIdx.x; k < H; k += 4 * kThreads) {
      const uint2 xv = *reinterpret_cast<const uint2*>(x + k), wv = *reinterpret_cast<const uint2*>(w + k);
      const uint32_t xs[2] = {xv.x, xv.y}, ws[2] = {wv.x, wv.y};
      uint32_t out[2];
#pragma unroll
      for (uint32_t e = 0; e < 2; ++e) {
        const bf16 lo =
            rms_norm_element<float>(f32_from_bits(xs[e] << 16), inv, f32_from_bits(ws[e] << 16), k_kind.value);
        const bf16 hi = rms_norm_element<float>(f32_from_bits(xs[e] & 0xffff0000u), inv,
                                                f32_from_bits(ws[e] & 0xffff0000u), k_kind.value);
        out[e] = uint32_t(lo) | uint32_t(hi) << 16;
      }
      *reinterpret_cast<uint2*>(xn + k) = make_uint2(out[0], out[1]);
    }
  });
  __syncthreads();
}

// Copies `bytes` (16-byte pieces) of this block's shared memory at `from` to `to` in every
// rank of the cluster (this one too), completing on each one's mbarrier `bar`: warp w pushes to
// rank w, its lanes over the pieces, so that each warp maps its peer's addresses once and no
// thread divides (a thread a piece of any rank, by `/` and `%`, and two
// `mapa` a piece, took ~0.6 us for attention's partials).
__device__ inline void push_to_cluster(const void* from, uint32_t to, uint32_t bytes, uint32_t bar) {
  static_assert(kThreads / 32 == kClusterRanks);
  const uint32_t pieces = bytes / 16, rank = warp_id(), peer = peer_address(to, rank), peer_bar = peer_address(bar, rank);
  for (uint32_t piece = lane_id(); piece < pieces; piece += 32)
    push16(peer + 16 * piece, reinterpret_cast<const uint4*>(from)[piece], peer_bar);
}


// The rank's share of a hop: out = r(base + r(Σ flagged pieces of each row)) for rows
// [rank H/8, (rank + 1) H/8) (bf16, shared memory), each pair of rows pushed into every rank's
// out (the same offset in each) on its mbarrier `bar`; a thread a row pair. Each block of a
// cluster reads its share of the words from the L2, where every block read all of them (on
// qwen3-0.6b the o_proj hop's 64 KB and the MLP hop's 96 KB a block, 7.7 and 11.5 MB at once).
// A peer pushes a hop's rows into out only once it has completed the hop before, which took all
// of this block's rows of that hop: each thread pushed them after reading its rows of that hop's
// base, and the block had read out's previous contents (two hops back) before that hop began.
__device__ __noinline__ bool add_flagged_rows(const bf16* base, bf16* out, const unsigned long long* words,
                                              uint32_t H, uint32_t n, uint32_t flag, uint32_t rank, uint32_t bar,
                                              Watch w) {
  const uint32_t share = H / kClusterRanks, first = rank * share;
  if (!__syncthreads_and(warp_id() != 0 || await_writers(words + first, H, n, flag, w))) return false;
  for (uint32_t i = first + 2 * threadIdx.x; i < first + share; i += 2 * kThreads) {
    float y[2];
    if (!flagged_pair_sums(words + i, H, n, flag, w, y)) return false;
    bf16 two[2];
#pragma unroll
    for (uint32_t e = 0; e < 2; ++e) two[e] = to_bf16(widen<float>(base[i + e]) + widen<float>(to_bf16(y[e])));
    const uint32_t v = uint32_t(two[0]) | uint32_t(two[1]) << 16, at = smem_address(out + i);
#pragma unroll
    for (uint32_t r = 0; r < kClusterRanks; ++r) push4(peer_address(at, r), v, peer_address(bar, r));
  }
  return true;
}

// Thread 0 waits for its mbarrier's phase; false when the run was aborted or the wait failed.
__device__ inline bool wait_bar(uint32_t bar, uint32_t parity, Watch w) {
  while (!mbar_test_wait(bar, parity))
    if (!w.ok()) return false;
  return true;
}

// Thread 0's record of the block's phases in a traced run (cluster_program.h's record layout):
// a phase from `begun` to its end, its wait the gap since the block's previous phase ended.
struct Tracer {
  DeviceTrace* records;  // the run's, from its first step on; nullptr: not tracing
  uint32_t step_base;    // the run's first step
  uint32_t layers;
  uint64_t begun, last_end;
  __device__ void begin() {
    if (records && threadIdx.x == 0) begun = global_timer_ns();
  }
  // Ends (step, layer's or the tail's) phase now; the next phase begins where it ended.
  __device__ void end(uint32_t step, uint32_t layer, ClusterPhase phase) {
    if (!records || threadIdx.x) return;
    const uint64_t now = global_timer_ns();
    const uint32_t at = cluster_trace_record(step - step_base, layers, layer, blockIdx.x, gridDim.x, phase);
    records[at] = {step, uint32_t(phase), blockIdx.x, 0, begun, now, begun - last_end};
    last_end = begun = now;
  }
};

struct Block {
  const ClusterProgram& p;
  const ClusterLaunch& l;
  uint8_t* smem;
  Layout at;
  uint32_t cluster, rank, G, D, H;
  uint32_t phase[kHopBar];  // thread 0's: the parity of each exchange mbarrier's next phase
  uint32_t hops;            // hops so far in this launch (every thread's count)
  uint32_t hop_phases;      // thread 0's: bit k, the parity of hop mbarrier k's next phase
  StreamState* stream;  // in shared memory
  uint32_t next;        // the stream's next chunk: the first of the phase to come
  Tracer trace;
  template <class T>
  __device__ T* buf(uint32_t offset) const {
    return reinterpret_cast<T*>(smem + offset);
  }
  __device__ uint32_t bar(uint32_t i) const { return smem_address(smem + at.bars + 8 * i); }
};

// Starts the copy of stream chunk j, if the launch reads it, into `slot` (one thread). On the
// refilling warp's path, just before its phase's barrier, so its chain is kept short: the
// index's fields all loaded at its entry, the piece found by independent compares, the ring's
// addresses computed before its stores (WeightRing::fill); then one dependent shared load, the
// layer's source.
__device__ __noinline__ void fill_chunk(const StreamState& s, uint32_t j, uint32_t slot) {
  ChunkIndex x;
  uint4* words = reinterpret_cast<uint4*>(&x);
  // volatile: loaded here, before any branch (written once, before the launch's first fill)
  for (uint32_t i = 0; i < 3; ++i) words[i] = ld_shared_v4_here(smem_address(&s.st.index) + 16 * i);
  const uint32_t q = x.by_step.mod(j);
  if (j >= x.total) return;
  if (q >= x.layers) {
    const Stream& st = s.st;
    const uint32_t first = (q - x.layers) * st.row_chunk, rows = min(st.row_chunk, st.lm_rows - first);
    s.ring.fill(j, slot, s.lm_head + size_t(st.lm_first + first) * s.H, rows * s.H * 2);
    return;
  }
  const uint32_t layer = x.by_layer.div(q), k = q - layer * x.by_layer.d;
  uint32_t piece = 0, from = 0;  // k's piece and that piece's first chunk (a piece of no chunks is never k's)
#pragma unroll
  for (uint32_t i = 0; i + 1 < kPieces; ++i) {
    piece += k >= x.first[i];
    from = k >= x.first[i] ? max(from, x.first[i]) : from;
  }
  // s.sources[layer][piece] by ld.shared (a generic load takes longer); written once, before the
  // launch's first fill, so the load needs no memory clobber
  const unsigned long long src = ld_shared_u64(smem_address(s.sources + layer * kPieces + piece));
  s.ring.fill(j, slot, reinterpret_cast<const uint8_t*>(src) + size_t(k - from) * kRingChunkBytes, kRingChunkBytes);
}

// Lane 0: its warp is done with chunk j, one of `readers`; the last reader refills the slot.
__device__ inline void release_chunk(const StreamState& s, uint32_t j, uint32_t readers) {
  const uint32_t slot = s.st.by_slots.mod(j);
  if (s.ring.release(slot, readers)) fill_chunk(s, j + s.ring.slots, slot);
}

// Lane 0: release_chunk later, when the warp's queue is next released (release_queue; the
// oldest now when the warp already holds kDeferred back). A refill issued at once lies on its
// phase's path, just before the block's barrier, and its copy lands while the next hop's round
// trips wait on the memory system (an MLP-only block's MLP 7.0 -> 5.5 us
// without them).
__device__ inline void defer_release(const StreamState& s, uint32_t j, uint32_t readers) {
  uint2* q = s.deferred + warp_id() * kDeferred;
  if (q[kDeferred - 1].x != ~0u) {
    release_chunk(s, q[0].x, q[0].y);
#pragma unroll
    for (uint32_t i = 0; i + 1 < kDeferred; ++i) q[i] = q[i + 1];
    q[kDeferred - 1].x = ~0u;
  }
  for (uint32_t i = 0; i < kDeferred; ++i)
    if (q[i].x == ~0u) {
      q[i] = make_uint2(j, readers);
      return;
    }
}

// The releases warp `warp` held back (defer_release), in order, by one lane: where none of the
// chunks they refill has been read yet (after a hop: in the next norm, or release_deferred).
__device__ __noinline__ void release_queue(const StreamState& s, uint32_t warp) {
  uint2* q = s.deferred + warp * kDeferred;
  for (uint32_t i = 0; i < kDeferred; ++i)
    if (q[i].x != ~0u) {
      release_chunk(s, q[i].x, q[i].y);
      q[i].x = ~0u;
    }
}
// The releases every warp held back (`s`'s queues), issued by the warps from `first` on, a lane
// a queue: warp w's lanes 0, 1, ... take queues w - first, w - first + (8 - first), ..., each its
// entries in order, while the warps before it work: warp 0 summing a norm's squares (first 1:
// warp w takes warp w - 1's, warp 1 also warp 7's), or warps 0 to G + 1 normalising the heads
// (front). One lane taking a warp's two queues in turn kept the norm's barrier waiting for up
// to four refills one after another (marks: ~0.2 us a norm); a lane for each entry issued a
// warp's copies all at once, and their burst slowed the phase that followed.
__device__ __noinline__ void release_queues_from(const StreamState& s, uint32_t first) {
  constexpr uint32_t kWarps = kThreads / 32;
  const uint32_t q = warp_id() - first + lane_id() * (kWarps - first);
  if (warp_id() < first || q >= kWarps) return;
  release_queue(s, q);
}

// Each warp's own held-back releases, by every thread, where the block waits next: after a hop
// that no phase of the block follows, and before the token's poll. With `stagger` (ns), warp w
// first sleeps w * stagger: a block that only waits spreads its copies over the wait, where
// issued all at once they slowed the other blocks' phases.
__device__ __noinline__ void release_deferred(const StreamState& s, uint32_t stagger) {
  if (lane_id() != 0) return;
  if (stagger && s.deferred[warp_id() * kDeferred].x != ~0u) __nanosleep(warp_id() * stagger);
  release_queue(s, warp_id());
}

// Warp w's part of `rows` rows of `row_bytes` streamed from chunk `first` on, `per_chunk` rows a
// chunk (the last may hold fewer), `chunks` chunks (the stream's count of the piece, so that no
// phase divides to find it): chunks w, w + 8, … whole when there are at
// least 8 of them, else its share of chunk w / (8 / chunks). f(generic address, shared address,
// first row, rows) once the chunk has landed; then the warp releases it, and its last reader
// fills the slot again: at once when the refill is a chunk before `later`, else when the warp's
// held-back releases are next issued (defer_release). False: a wait failed.
template <class F>
__device__ inline bool for_warp_rows(const StreamState& s, uint32_t first, uint32_t chunks, uint32_t rows,
                                     uint32_t per_chunk, uint32_t row_bytes, uint32_t later, Watch& w, F f) {
  constexpr uint32_t kWarps = kThreads / 32;
  if (!chunks) return true;
  // share = kWarps / chunks (8, 4, 2 or 1) as a shift, and a chunk's slot by a multiply-high:
  // each division here was on the phase's path
  const uint32_t shift = chunks == 1 ? 3 : chunks == 2 ? 2 : chunks <= 4 ? 1 : 0, share = 1u << shift;
  const uint32_t part = (per_chunk + share - 1) >> shift;
  const WeightRing& ring = s.ring;
  for (uint32_t c = warp_id() >> shift; c < chunks; c += kWarps >> shift) {
    const uint32_t j = first + c, held = min(per_chunk, rows - c * per_chunk);
    const uint32_t begin = min((warp_id() & (share - 1)) * part, held), count = min(begin + part, held) - begin;
    const uint32_t turn = s.st.by_slots.div(j), slot = j - turn * ring.slots;
    while (!ring.landed(j, slot, turn & 1u))
      if (!w.ok()) return false;
    if (count)
      f(ring.data(slot) + begin * row_bytes, ring.address(slot) + begin * row_bytes, c * per_chunk + begin, count);
    __syncwarp();
    if (lane_id() == 0) {
      if (j + ring.slots < later) {
        if (ring.release(slot, share)) fill_chunk(s, j + ring.slots, slot);
      } else {
        defer_release(s, j, share);
      }
    }
  }
  return true;
}

// Where a phase's dots go, each by the lane of its row in the warp that computed it.
struct DotsOut {
  enum Kind : uint32_t {
    kFloats,  // f32 at `at` (shared memory)
    kBf16,    // rounded to bf16 at `at` (shared memory)
    kWords,   // flagged words with `flag` at `at` (global memory)
    kLogits,  // rounded logits at `at` (global memory), row i's index first + i; each warp's
              // argmax partial into `partials` (shared memory, a slot a warp)
  } kind;
  void* at;
  uint32_t flag, first;
  ArgmaxPartial* partials;
};

// The dots of `rows` rows streamed from chunk `first` (`chunks` chunks of per_chunk rows,
// row_bytes apart; refills of chunk `later` on held back, as for_warp_rows says) with x (shared
// address, K elements, a multiple of kDotBlock), 8 rows a round, into `out`; the round's 8
// butterflies share their shuffles (warp_butterfly_rows8: 9 where they took 40, which
// was a third of an o_proj round's instructions). Every projection of the program goes through
// this one copy. False: a wait failed.
__device__ __noinline__ bool stream_dots(const StreamState& s, uint32_t first, uint32_t chunks, uint32_t rows,
                                         uint32_t per_chunk, uint32_t row_bytes, uint32_t later, uint32_t x, uint32_t K,
                                         DotsOut out, Watch w) {
  constexpr uint32_t R = 8;
  ArgmaxPartial best = argmax_none(out.first);
  const bool ok = for_warp_rows(s, first, chunks, rows, per_chunk, row_bytes, later, w,
                                [&](const uint8_t*, uint32_t at, uint32_t i0, uint32_t count) {
    for (uint32_t g = 0; g < count; g += R) {
      uint32_t a[R];
#pragma unroll
      for (uint32_t e = 0; e < R; ++e) a[e] = at + min(g + e, count - 1) * row_bytes;
      float y[R];
      // Two chunks of each row a round where K allows: 16 loads in flight a lane, where one
      // chunk's 8 loads waited on their first use (-1% a token).
      if (K % (2 * kDotBlock) == 0) warp_lane_sums_shared<R, 2>(a, x, K, y);
      else warp_lane_sums_shared<R, 1>(a, x, K, y);
      // Lane 4e stores row g + e: one copy of each kind's store.
      const float mine = warp_butterfly_rows8(y);
      const uint32_t e = (lane_id() >> 2) & 7u;
      const uint32_t i = i0 + g + e;
      if ((lane_id() & 3u) == 0 && e < min(R, count - g)) {
        if (out.kind == DotsOut::kFloats) static_cast<float*>(out.at)[i] = mine;
        else if (out.kind == DotsOut::kBf16) static_cast<bf16*>(out.at)[i] = to_bf16(mine);
        else if (out.kind == DotsOut::kWords) store_word(static_cast<unsigned long long*>(out.at) + i, mine, out.flag);
        else {
          const float v = bf16_to_f32(to_bf16(mine));
          static_cast<float*>(out.at)[i] = v;
          argmax_offer_logit(best, v, out.first + i);  // a lane's rows come in index order
        }
      }
    }
  });
  if (out.kind == DotsOut::kLogits) {  // the warp's best: argmax_merge is associative (tile_projection.cuh)
    best = warp_argmax(best);
    if (lane_id() == 0) out.partials[warp_id()] = best;
  }
  return ok;
}

// Every thread passes once the bytes thread 0 posted for mbarrier `which` (before or after they
// land: the phase completes when both have happened) have landed.
__device__ inline bool receive(Block& b, uint32_t which, Watch w, bool& ok) {
  if (threadIdx.x == 0) {
    ok = ok && wait_bar(b.bar(which), b.phase[which], w);
    b.phase[which] ^= 1u;
  }
  return __syncthreads_and(ok);
}

// A hop: out = r(base + r(Σ the n flagged pieces of each row)) over all H rows, each rank of the
// cluster reading and pushing its share (add_flagged_rows); every thread passes once all 8
// shares have landed. Hops alternate between two mbarriers.
__device__ inline bool hop(Block& b, const bf16* base, bf16* out, const unsigned long long* words, uint32_t n,
                           uint32_t flag, Watch w) {
  const uint32_t k = b.hops++ & 1u, bar = b.bar(kHopBar + k);
  if (threadIdx.x == 0) mbar_arrive_expect_tx(bar, b.H * 2);
  bool ok = add_flagged_rows(base, out, words, b.H, n, flag, b.rank, bar, w);
  // The parity by a bit, not phase[]: an index known only at run time puts an array in local memory.
  if (threadIdx.x == 0) {
    ok = ok && wait_bar(bar, b.hop_phases >> k & 1u, w);
    b.hop_phases ^= 1u << k;
  }
  return __syncthreads_and(ok);
}

// The G heads' outputs from their chunks' partial rows (recv: [head][chunk][ps], in place), with
// attn_merge_head's math and order: thread 8h + c (< 8G) computes head h's max and chunk c's
// weight, then every element is merged over the chunks. Both passes load every one of the
// kClusterRanks chunks' values (the buffer holds them all; past `used`, stale or unwritten ones)
// before using any, and leave the absent chunks out by a select: with a test around each
// chunk's loads, ptxas kept the loads inside each chunk's branch and the chunks ran one after
// another (SASS). merge_heads' separate pass for the maxes took one more
// barrier (the merge took ~1.2 us: marks).
__device__ inline void merge_chunks(const float* recv, float* weights, uint32_t ps, uint32_t used, uint32_t D,
                                    uint32_t G, bf16* out) {
  if (threadIdx.x < G * kClusterRanks) {
    const float* rows = recv + threadIdx.x / kClusterRanks * kClusterRanks * ps;
    const uint32_t c = threadIdx.x % kClusterRanks;
    float m[kClusterRanks];
#pragma unroll
    for (uint32_t k = 0; k < kClusterRanks; ++k) m[k] = rows[k * ps];
    float M = -INFINITY;
#pragma unroll
    for (uint32_t k = 0; k < kClusterRanks; ++k) M = k < used ? attn_merge_max_step(M, m[k]) : M;
    if (c < used) weights[threadIdx.x] = attn_merge_weight<float>(rows + c * ps, M);
  }
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < G * D; i += kThreads) {
    const uint32_t h = i / D, d = i % D;
    const float *rows = recv + h * kClusterRanks * ps, *w = weights + h * kClusterRanks;
    float l[kClusterRanks], acc[kClusterRanks], wc[kClusterRanks];
#pragma unroll
    for (uint32_t c = 0; c < kClusterRanks; ++c) {
      l[c] = rows[c * ps + 1];
      acc[c] = rows[c * ps + 2 + d];
      wc[c] = w[c];
    }
    float L = 0.0f, o = 0.0f;
#pragma unroll
    for (uint32_t c = 0; c < kClusterRanks; ++c) {
      float Lc = L, oc = o;
      attn_merge_add<float>(Lc, oc, l[c], acc[c], wc[c]);
      L = c < used ? Lc : L;
      o = c < used ? oc : o;
    }
    out[i] = to_bf16(o / L);
  }
  __syncthreads();
}

// Attention's block path (chunks longer than the warps take) in a function of its own, so that
// its code does not change with the register allocation of the rest of the kernel: inlined, a
// change to the dots' code made it 3% slower at position 4096. The
// kernel's spills went from 56 bytes to none.
__device__ __noinline__ void chunk_partials(const AttnChunkShape& a, const bf16* K, const bf16* V, const bf16* k_own,
                                            const bf16* v_own, PositionRange range, float* partial, uint32_t ps,
                                            uint8_t* smem) {
  attn_chunk_partials(a, K, V, k_own, v_own, range, [&](uint32_t j) { return partial + j * ps; }, smem);
}

// The first chunk whose refill the phase of `layer` starting at the block's next chunk holds
// back (for_warp_rows): the block's next layer's chunks of the same role, which it reads after
// the hop that follows at the earliest, so they are issued after that hop (release_queue). None
// in the last layer: the LM head reads those refills right after the last hop.
__device__ inline uint32_t held_from(const Block& b, uint32_t layer) {
  return layer + 1 < b.p.params.n_layers ? b.next + b.stream->st.per_layer : ~0u;
}

// A front block's inputs besides its weights, its cache and h, copied into shared memory before
// the hop that precedes its layer, so that they land during it (norm_into's wait and barrier
// publish them): the input norm's weights, the heads' norms' weights and, at a step's first
// layer, the position's RoPE row. Its attention read the last two from global memory right after
// the q/k/v exchange, where each load waited behind the block's bulk copies in flight (~0.9 us a
// layer at position 1, ~1.2 more behind the K/V rows' staging at 1024).
__device__ inline void stage_front(const Block& b, const ClusterLayer& L, const bf16* rope_row) {
  bf16* heads = b.buf<bf16>(b.at.heads);
  stage_norm(L.in_norm, b.buf<bf16>(b.at.norm), b.H);
  stage_to_shared<Src::Resident>(L.q_norm, heads, b.D);
  stage_to_shared<Src::Resident>(L.k_norm, heads + b.D, b.D);
  if (rope_row) stage_to_shared<Src::Resident>(rope_row, heads + 2 * b.D, b.p.params.rotary_dim);
}

// The front gang's member: q, k, v rows, attention over its chunk, o_proj's piece of its head.
__device__ inline bool front(Block& b, const ClusterLayer& L, uint32_t layer, uint32_t position, uint32_t step,
                             uint32_t flag, unsigned long long* o_words) {
  const SpGraphParams& p = b.p.params;
  const uint32_t G = b.G, D = b.D, H = b.H, g = b.cluster, r = b.rank, n = position + 1;
  const uint32_t rows = (G + 2) * D / kClusterRanks, ps = partial_stride(D);
  const PositionRange range = chunk_positions(n, kClusterRanks, r);
  const uint32_t used = nonempty_chunks(n, kClusterRanks);
  bf16 *xn = b.buf<bf16>(b.at.xn), *qkv = b.buf<bf16>(b.at.qkv);
  float* scratch = b.buf<float>(0);
  if (threadIdx.x == 0) {
    mbar_arrive_expect_tx(b.bar(kQkvBar), (G + 2) * D * 2);
    mbar_arrive_expect_tx(b.bar(kPartialBar), used * G * ps * 4);  // used >= 1: chunk 0 holds position 0
  }
  norm_into(b.buf<bf16>(b.at.h), b.buf<bf16>(b.at.norm), xn, H, p.rms_eps, p.norm_kind, scratch, *b.stream);
  // The rank's rows of the head's q | k | v rows. A block that also runs the MLP refills its
  // ring with this layer's o_proj, gate and up chunks as q/k/v's free their slots. Where the
  // step's chunks take attention's warp path, it holds those refills back too and issues them by
  // the warps the heads' norms leave idle (below): at once they lay on the dots' path (its q/k/v
  // took 0.2-0.3 us longer than a front-only block's, which holds back the next layer's alone);
  // issued by warps 1-7 while they waited for the peers' rows, 0.6 us longer; issued during a
  // long chunk's K/V staging, 3% slower at position 4096.
  const AttnChunkShape a{G, D, kClusterRanks, p.context, 1, b.l.score_positions, b.l.kv_positions, b.p.kv_stride, ps};
  const bool hold = b.cluster >= b.l.clusters - b.p.mlp_gangs &&
                    attn_warp_chunks<kWarpChunkDims<false>>(a, chunk_size(n, kClusterRanks));
  bf16* mine = b.buf<bf16>(b.at.mine);
  const uint32_t later = held_from(b, layer);
  b.next += b.stream->st.qkv;
  const bool dots = stream_dots(*b.stream, b.next - b.stream->st.qkv, b.stream->st.qkv, rows, b.stream->st.row_chunk,
                                H * 2, hold ? 0 : later, smem_address(xn), H, {DotsOut::kBf16, mine},
                                watch(b.p, b.l, L.attention_task, step, SP_NO_COUNTER, 0));
  if (!__syncthreads_and(dots)) return false;
  push_to_cluster(mine, smem_address(qkv + r * rows), rows * 2, b.bar(kQkvBar));
  bool ok = true;
  if (!receive(b, kQkvBar, watch(b.p, b.l, L.attention_task, step, SP_NO_COUNTER, 0), ok)) return false;
  b.trace.end(step, layer, kPhaseQkv);

  // Attention over chunk r, as attention_tile does it, with q, k and v from the gang's rows.
  const uint32_t len = range.end - range.begin;
  bf16* K = L.kv + size_t(g) * p.context * b.p.kv_stride;
  bf16* V = L.kv + size_t(p.n_kv_heads + g) * p.context * b.p.kv_stride;
  const bf16* heads = b.buf<bf16>(b.at.heads);  // stage_front's: q norm, k norm, RoPE row
  bf16* q = b.buf<bf16>(attn_q_offset());
  bf16* kv = b.buf<bf16>(attn_kv_offset(G, D, a.score_positions));
  bf16* kv_second = kv + size_t(a.kv_positions) * D;
  float* partial = b.buf<float>(b.at.mine);
  float* recv = b.buf<float>(b.at.recv);  // [head][chunk][ps]
  if (len) {
    const bool appends = range.end == n, single = attn_single_stage(a, len);
    const uint32_t cached = appends ? len - 1 : len;
    if (single)
      stage_rows(K + size_t(range.begin) * a.cache_stride, kv, V + size_t(range.begin) * a.cache_stride, kv_second,
                 a.cache_stride, cached, D);
    if (hold) release_queues_from(*b.stream, min(G + 2, kThreads / 32 - 1));  // by the warps the loop leaves idle
    for (uint32_t w = warp_id(); w < (appends ? G + 2 : G); w += kThreads / 32) {
      bf16* row = qkv + size_t(w) * D;  // q heads, then k, then v
      if (w <= G)
        norm_rope_in_place(row, heads + (w < G ? 0 : D), heads + 2 * D, D, p.rotary_dim / 2, p.rms_eps, p.norm_kind);
      if (w < G) continue;
      bf16* cache_row = (w == G ? K : V) + size_t(position) * a.cache_stride;
      for (uint32_t d = lane_id(); d < D; d += 32) cache_row[d] = row[d];
    }
    cp_async_wait_all();
    __syncthreads();
    for (uint32_t i = threadIdx.x; i < G * D; i += kThreads) q[i] = qkv[i];
    if (single && appends)
      for (uint32_t d = threadIdx.x; d < 2 * D; d += kThreads)
        (d < D ? kv : kv_second)[size_t(cached) * D + d % D] = qkv[(G + d / D) * D + d % D];
    __syncthreads();
    if (attn_warp_chunks<kWarpChunkDims<false>>(a, chunk_size(n, kClusterRanks))) {
      const uint32_t j = warp_id();
      if (j < G) {
        const WarpPartial<kWarpChunkDims<false>> w =
            attn_warp_partial<kWarpChunkDims<false>>(a, q + size_t(j) * D, kv, kv_second, len);
        float* row = partial + j * ps;
        if (lane_id() == 0) row[0] = w.m, row[1] = w.l;
#pragma unroll
        for (uint32_t i = 0; i < kWarpChunkDims<false>; ++i)
          if (lane_id() + 32 * i < D) row[2 + lane_id() + 32 * i] = w.acc[i];
      }
    } else {
      chunk_partials(a, K, V, appends ? qkv + size_t(G) * D : nullptr, appends ? qkv + size_t(G + 1) * D : nullptr,
                     range, partial, ps, b.smem);
    }
    __syncthreads();
    for (uint32_t j = 0; j < G; ++j)
      push_to_cluster(partial + j * ps, smem_address(recv + (j * kClusterRanks + r) * ps), ps * 4, b.bar(kPartialBar));
  } else if (hold) {
    release_queues_from(*b.stream, 0);  // an empty chunk: nothing to do but wait for the peers' partials
  }
  // A block that also runs the MLP streams both roles' weights through its ring (on qwen3-0.6b 24
  // chunks a layer, 8 slots), so its down chunks are copied only once its gate/up dots free their
  // slots: it asks the L2 for them now, and those copies then come from the L2 (-0.9% a token
  // at position 1, -1.7% at 1024).
  if (threadIdx.x == 0 && b.cluster >= b.l.clusters - b.p.mlp_gangs) {
    const StreamState& s = *b.stream;
    bulk_prefetch_l2(s.sources[layer * kPieces + kDownPiece], s.st.down * kRingChunkBytes);
  }
  if (!receive(b, kPartialBar, watch(b.p, b.l, L.attention_task, step, SP_NO_COUNTER, 0), ok)) return false;
  bf16* out = b.buf<bf16>(b.at.attn_out);
  merge_chunks(recv, b.buf<float>(b.at.weights), ps, used, D, G, out);
  b.trace.end(step, layer, kPhaseAttention);

  // o_proj's piece g (columns [g G D, (g + 1) G D), piece-major) over rows [r H/8, (r + 1) H/8).
  const uint32_t o_rows = H / kClusterRanks, o_bytes = G * D * 2;
  const uint32_t first = b.next;
  b.next += b.stream->st.o;
  return stream_dots(*b.stream, first, b.stream->st.o, o_rows, kRingChunkBytes / o_bytes, o_bytes, later,
                     smem_address(out), G * D, {DotsOut::kWords, o_words + size_t(g) * H + r * o_rows, flag},
                     watch(b.p, b.l, L.o_proj_task, step, SP_NO_COUNTER, 0));
}

// The MLP gang's member holding piece 8k + r: its activations and down's dots over its columns,
// each rank's share pushed to it; then the gang's sum of this rank's share.
__device__ inline bool mlp(Block& b, const ClusterLayer& L, uint32_t layer, uint32_t gang, uint32_t step,
                           uint32_t flag, unsigned long long* mlp_words) {
  const SpGraphParams& p = b.p.params;
  const uint32_t H = b.H, P = b.p.mlp_piece, share = H / kClusterRanks;
  const uint32_t share_shift = __ffs(share) - 1;  // H is a power of two (its rows divide a ring chunk)
  if (threadIdx.x == 0) mbar_arrive_expect_tx(b.bar(kDownBar), H * 4);
  bf16 *xn = b.buf<bf16>(b.at.xn), *act = b.buf<bf16>(b.at.act);
  float* scratch = b.buf<float>(0);
  norm_into(b.buf<bf16>(b.at.hattn), b.buf<bf16>(b.at.norm), xn, H, p.rms_eps, p.norm_kind, scratch, *b.stream);
  // Gate row i (< P) and up row i (P + i) of the piece, then act = swiglu(r(g), r(u)).
  const StreamState& s = *b.stream;
  const uint32_t after = held_from(b, layer);
  const bool dots = stream_dots(s, b.next, 2 * s.st.gate, 2 * P, s.st.row_chunk, H * 2, after, smem_address(xn), H,
                                {DotsOut::kFloats, scratch + 8}, watch(b.p, b.l, L.mlp_task, step, SP_NO_COUNTER, 0));
  b.next += 2 * s.st.gate;
  if (!__syncthreads_and(dots)) return false;
  for (uint32_t i = threadIdx.x; i < P; i += kThreads)
    act[i] = swiglu(rounded(scratch[8 + i]), rounded(scratch[8 + P + i]));
  __syncthreads();
  // Down's dots over the piece's P columns (piece-major rows), each the canonical dot: P / 8
  // lanes a row (a group), each lane that dot's lane of its 8 columns, so a warp's load covers
  // whole rows; each group 4 rows a round, one row a load, the group's rows rotated so that two
  // groups loading at once use different banks, and its 4 dots then pushed to their rank in one
  // push by its first lane. (A lane a row read rows 256 bytes apart, all in the same 4 banks: 8
  // times the shared-memory wavefronts.)
  const uint32_t shift = __ffs(P / kDotVec) - 1, lanes = 1u << shift;  // P / 8 is 1, 2, 4 or 8: shifts, not divisions
  const uint32_t groups = 32u >> shift, group = lane_id() >> shift, turn = group % 4,
                 column = lane_id() & (lanes - 1);  // the lane's 8 columns of its rows
  float a[kDotVec];
  unpack_bf16x8(*reinterpret_cast<const uint4*>(act + column * kDotVec), a);
  float* recv = b.buf<float>(b.at.down);  // [rank][share]
  Watch w = watch(b.p, b.l, L.mlp_task, step, SP_NO_COUNTER, 0);
  bool ok = for_warp_rows(s, b.next, s.st.down, H, kRingChunkBytes / (P * 2), P * 2, after, w,
                          [&](const uint8_t*, uint32_t at, uint32_t i0, uint32_t count) {
    // Every group runs the same rounds (the shuffles need the whole warp); count is a multiple
    // of 4, and a group past it reads the last 4 rows again and pushes nothing.
    for (uint32_t g = 4 * group; g < count + 4 * group; g += 4 * groups) {
      const uint32_t first = min(g, count - 4);
      float d[4];  // d[e]: row first + (e + turn) % 4
#pragma unroll
      for (uint32_t e = 0; e < 4; ++e) {
        const uint32_t row = first + (e + turn) % 4;
        d[e] = 0.0f;
        accumulate_bf16x8(d[e], ld_shared_v4(at + (row * P + column * kDotVec) * 2), a);
        d[e] = d[e] + 0.0f;  // the butterfly's steps over empty lanes (+0: a -0 sum becomes +0)
      }
#pragma unroll
      for (uint32_t off = 4; off > 0; off /= 2)
        if (off < lanes)
#pragma unroll
          for (uint32_t e = 0; e < 4; ++e) d[e] = d[e] + __shfl_xor_sync(~0u, d[e], off);
      // Rows first .. first + 3 in order: d rotated back by turn.
      float r[4];
#pragma unroll
      for (uint32_t e = 0; e < 4; ++e) r[e] = turn & 1u ? d[(e + 3) % 4] : d[e];
#pragma unroll
      for (uint32_t e = 0; e < 4; ++e) d[e] = turn & 2u ? r[(e + 2) % 4] : r[e];
      const uint32_t row = i0 + first, to = row >> share_shift;
      if (column == 0 && g < count)
        push16(peer_address(smem_address(recv + b.rank * share + (row & (share - 1))), to),
               make_uint4(__float_as_uint(d[0]), __float_as_uint(d[1]), __float_as_uint(d[2]), __float_as_uint(d[3])),
               peer_address(b.bar(kDownBar), to));
    }
  });
  b.next += s.st.down;
  if (!receive(b, kDownBar, watch(b.p, b.l, L.mlp_task, step, SP_NO_COUNTER, 0), ok)) return false;
  for (uint32_t i = threadIdx.x; i < share; i += kThreads) {
    float sum = recv[i];
    for (uint32_t m = 1; m < kClusterRanks; ++m) sum = sum + recv[m * share + i];
    store_word(mlp_words + size_t(gang) * H + b.rank * share + i, sum, flag);
  }
  b.trace.end(step, layer, kPhaseMlp);
  return true;
}

// The LM head's rows of this block, their logits and the block's argmax partial, stored by
// thread 0 as two flagged words (value, index) with release semantics: a block that acquires
// them (next_token) sees the KV cache rows this block wrote in the step. One set of words
// serves every step: a block stores the next step's only after that step's first hops, which
// every block passes only once it has read this step's.
__device__ inline bool lm_head(Block& b, uint32_t step, uint32_t flag) {
  const ClusterProgram& p = b.p;
  const uint32_t r0 = b.stream->st.lm_first, H = b.H;
  bf16* xn = b.buf<bf16>(b.at.xn);
  float* scratch = b.buf<float>(0);
  norm_into(b.buf<bf16>(b.at.h), b.buf<bf16>(b.at.norm), xn, H, p.params.rms_eps, p.params.norm_kind, scratch,
            *b.stream);
  const StreamState& stream = *b.stream;
  ArgmaxPartial* partials = b.buf<ArgmaxPartial>(b.at.partials);
  b.next += stream.st.lm;  // the end of the step: refills of the next step's chunks wait for its token
  const bool dots = stream_dots(stream, b.next - stream.st.lm, stream.st.lm, stream.st.lm_rows, stream.st.row_chunk,
                                H * 2, b.next, smem_address(xn), H, {DotsOut::kLogits, p.logits + r0, 0, r0, partials},
                                watch(p, b.l, p.lm_head_task, step, SP_NO_COUNTER, 0));
  if (!__syncthreads_and(dots)) return false;
  const ArgmaxPartial best = block_argmax(partials[warp_id()], b.smem);
  if (threadIdx.x == 0) {
    const unsigned long long value = (static_cast<unsigned long long>(flag) << 32) | __float_as_uint(best.value),
                             index = (static_cast<unsigned long long>(flag) << 32) | best.index;
    st_release_gpu_v2_u64(p.argmax_words + blockIdx.x * kArgmaxStride, value, index);
  }
  b.trace.end(step, 0, kPhaseLmHead);
  return true;
}

// The step's token, chosen by every block from all blocks' argmax partials (thread t acquires
// block t's: one round trip, where the last block to count its partial in read them 16 at a
// time and published the token, ~7 us with the next step's refills in flight)
// or the forced one; the block's copy of the step state advanced, and by block 0 the
// run's (out_tokens, state).
__device__ inline bool next_token(Block& b, SpStepState& state, uint32_t step, uint32_t flag, uint32_t& token) {
  const ClusterProgram& p = b.p;
  ArgmaxPartial mine{argmax_none(0).value, ~0u};
  bool ok = true;
  if (threadIdx.x < gridDim.x) {
    const unsigned long long* at = p.argmax_words + threadIdx.x * kArgmaxStride;
    Watch w = watch(p, b.l, p.sample_task, step, p.sample_counter, flag);
    ulonglong2 v;
    for (;;) {
      v = ld_acquire_gpu_v2_u64(at);
      if (carries(v.x, flag) && carries(v.y, flag)) break;
      if (!w.ok()) {
        ok = false;
        break;
      }
    }
    mine = {word_value(v.x), uint32_t(v.y)};
  }
  if (!__syncthreads_and(ok)) return false;  // also: thread 0 is done with block_argmax's slots (lm_head)
  const ArgmaxPartial best = block_argmax(warp_argmax(mine), b.smem);
  if (threadIdx.x == 0) {
    if (state.step >= p.params.max_steps) {
      report_failure(p.control, {kFailStepRange, p.sample_task, step, SP_NO_COUNTER, state.step, p.params.max_steps});
      ok = false;
    } else {
      note_nonfinite_logits(state, best);
      token = step_is_forced(state) ? load_data(p.forced_tokens + state.step + 1) : best.index;
      if (blockIdx.x == 0) {
        advance_step(state, token, p.out_tokens);
        *p.state = state;
      } else {
        advance_state(state, token);
      }
    }
  }
  return __syncthreads_and(ok);
}

// The block's stream (one step's chunks, the launch's total) for its roles, through a ring of
// `slots`.
__device__ inline Stream block_stream(const Block& b, bool front, bool mlp, uint32_t slots) {
  const uint32_t H = b.H, P = b.p.mlp_piece;
  Stream st{};
  st.row_chunk = kRingChunkBytes / (H * 2);
  if (front) {
    st.qkv = (b.G + 2) * b.D / kClusterRanks / st.row_chunk;
    st.o = H / kClusterRanks * b.G * b.D * 2 / kRingChunkBytes;
  }
  if (mlp) {
    st.gate = P / st.row_chunk;
    st.down = H * P * 2 / kRingChunkBytes;
  }
  st.per_layer = st.qkv + st.o + 2 * st.gate + st.down;
  const uint32_t chunks[kPieces] = {st.qkv, st.o, st.gate, st.gate, st.down};
  for (uint32_t i = 0, first = 0; i + 1 < kPieces; ++i) st.index.first[i] = first += chunks[i];
  st.index.layers = b.p.params.n_layers * st.per_layer;
  const LmRows lm = cluster_lm_rows(b.p.params.vocab, blockIdx.x, gridDim.x);
  st.lm_first = lm.first;
  st.lm_rows = lm.rows;
  st.lm = (st.lm_rows + st.row_chunk - 1) / st.row_chunk;
  st.per_step = st.index.layers + st.lm;
  st.index.total = b.l.steps * st.per_step;
  st.index.by_step = FastDiv::of(st.per_step);
  st.index.by_layer = FastDiv::of(st.per_layer);
  st.by_slots = FastDiv::of(slots);
  return st;
}

// Where the block's share of each of a layer's pieces starts (cluster_program.h's layouts).
__device__ inline void set_sources(const Block& b, const ClusterLayer& L, const bf16** s, bool front, bool mlp,
                                   uint32_t mlp_first) {
  const uint32_t G = b.G, D = b.D, H = b.H, g = b.cluster, r = b.rank, P = b.p.mlp_piece;
  if (front) {  // the rank's q/k/v rows lie in one of q, k and v (cluster_program_problem)
    const uint32_t gr = r * (G + 2) * D / kClusterRanks;
    s[kQkvPiece] = gr < G * D         ? L.wq + size_t(g * G * D + gr) * H
                   : gr < (G + 1) * D ? L.wk + size_t(g * D + gr - G * D) * H
                                      : L.wv + size_t(g * D + gr - (G + 1) * D) * H;
    s[kOPiece] = L.wo + (size_t(g) * H + r * (H / kClusterRanks)) * (G * D);
  }
  if (mlp) {
    const size_t j = (b.cluster - mlp_first) * kClusterRanks + r;
    s[kGatePiece] = L.wg + j * P * H;
    s[kUpPiece] = L.wu + j * P * H;
    s[kDownPiece] = L.wd + j * H * P;
  }
}

__global__ void __launch_bounds__(kThreads, 1) cluster_kernel(const ClusterProgram p, const ClusterLaunch l) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ uint32_t s_token;
  __shared__ SpStepState s_state;  // thread 0's copy, advanced every step (next_token)
  const SpGraphParams& prm = p.params;
  const uint32_t L = prm.n_layers, H = prm.hidden, mlp_first = l.clusters - p.mlp_gangs;
  const uint32_t cluster = blockIdx.x / kClusterRanks;
  const bool is_front = cluster < prm.n_kv_heads, is_mlp = cluster >= mlp_first;
  const uint32_t slots = is_front ? l.ring_slots : l.mlp_ring_slots;
  Block b{p,
          l,
          smem,
          is_front ? layout(prm, l.score_positions, l.kv_positions, slots) : mlp_only_layout(prm, slots),
          cluster,
          cluster_rank(),
          prm.n_heads / prm.n_kv_heads,
          prm.head_dim,
          H,
          {},
          0,
          0};
  b.stream = b.buf<StreamState>(b.at.stream);
  b.trace = {p.control->trace, p.control->step_base, L, 0, global_timer_ns()};
  const bf16** sources = b.buf<const bf16*>(b.at.sources);
  if (threadIdx.x == 0) {
    for (uint32_t i = 0; i < kExchangeBars; ++i) mbar_init(b.bar(i), 1);
    *b.stream = {{smem + b.at.ring, smem_address(smem + b.at.ring), b.bar(kExchangeBars), b.buf<uint32_t>(b.at.tags),
                  b.buf<uint32_t>(b.at.released), slots},
                 block_stream(b, is_front, is_mlp, slots),
                 sources,
                 p.lm_head,
                 b.buf<uint2>(b.at.deferred),
                 H};
    b.stream->ring.init();
    mbar_init_fence();
  }
  if (threadIdx.x < kThreads / 32 * kDeferred) b.buf<uint2>(b.at.deferred)[threadIdx.x] = make_uint2(~0u, 0);
  for (uint32_t layer = threadIdx.x; layer < L; layer += kThreads)
    set_sources(b, p.layers[layer], sources + layer * kPieces, is_front, is_mlp, mlp_first);
  cluster_sync();  // every peer's mbarriers exist before anything is pushed to them; the ring is set
  const StreamState& stream = *b.stream;
  if (threadIdx.x == 0)
    for (uint32_t j = 0; j < min(stream.ring.slots, stream.st.index.total); ++j) fill_chunk(stream, j, j);
  bf16 *h = b.buf<bf16>(b.at.h), *hattn = b.buf<bf16>(b.at.hattn), *norm = b.buf<bf16>(b.at.norm);
  auto o_words = [&](uint32_t flag) { return p.o_words + size_t(flag & 1u) * prm.n_kv_heads * H; };
  auto mlp_words = [&](uint32_t flag) { return p.mlp_words + size_t(flag & 1u) * p.mlp_gangs * H; };
  bool ok = true;
  if (threadIdx.x == 0) {
    s_state = *p.state;
    s_token = s_state.token;
  }
  for (uint32_t s = 0; s < l.steps && ok; ++s) {
    const uint32_t step = l.first_step + s, position = l.first_position + s, first_flag = l.flag_base + s * L;
    if (threadIdx.x == 0) {
      if (s_token >= prm.vocab) {
        report_failure(p.control, {kFailTokenRange, p.embed_task, step, SP_NO_COUNTER, s_token, prm.vocab});
        ok = false;
      }
      if (position >= prm.context) {
        report_failure(p.control,
                       {kFailPositionRange, p.layers[0].attention_task, step, SP_NO_COUNTER, position, prm.context});
        ok = false;
      }
    }
    if (!__syncthreads_and(ok)) break;
    b.next = s * stream.st.per_step;
    if (is_front) stage_front(b, p.layers[0], p.rope + size_t(position) * p.rope_stride);
    for (uint32_t k = threadIdx.x; k < H; k += kThreads)
      h[k] = load_bf16<Src::Weight>(p.embed + size_t(s_token) * p.embed_stride + k);
    __syncthreads();
    b.trace.begin();
    for (uint32_t layer = 0; layer < L && ok; ++layer) {
      const ClusterLayer& Ly = p.layers[layer];
      const uint32_t flag = first_flag + layer + 1;
      if (layer > 0) {
        const ClusterLayer& before = p.layers[layer - 1];
        Watch w = watch(p, l, before.mlp_task, step, before.mlp_counter, flag - 1);
        if (is_front) stage_front(b, Ly, nullptr);
        ok = hop(b, hattn, h, mlp_words(flag - 1), p.mlp_gangs, flag - 1, w);
        if (!ok) break;
        if (!is_front) release_deferred(stream, kRefillStaggerNs);  // a front block's norm issues them
        b.trace.begin();
      }
      ok = __syncthreads_and(!is_front || front(b, Ly, layer, position, step, flag, o_words(flag)));
      if (!ok) break;
      if (is_front) b.trace.end(step, layer, kPhaseOProj);
      Watch w = watch(p, l, Ly.o_proj_task, step, Ly.o_proj_counter, flag);
      if (is_mlp) stage_norm(Ly.post_norm, norm, H);
      ok = hop(b, h, hattn, o_words(flag), prm.n_kv_heads, flag, w);
      if (ok && !is_mlp) release_deferred(stream, kRefillStaggerNs);  // an MLP block's norm issues them
      b.trace.begin();
      if (ok && is_mlp) ok = __syncthreads_and(mlp(b, Ly, layer, b.cluster - mlp_first, step, flag, mlp_words(flag)));
    }
    if (!ok) break;
    const uint32_t last = first_flag + L;
    Watch w = watch(p, l, p.layers[L - 1].mlp_task, step, p.layers[L - 1].mlp_counter, last);
    stage_norm(p.final_norm, norm, H);
    ok = hop(b, hattn, h, mlp_words(last), p.mlp_gangs, last, w);
    b.trace.begin();
    if (ok) ok = __syncthreads_and(lm_head(b, step, last));
    // The token: every block's but the last step's, when only block 0 records it.
    const bool more = s + 1 < l.steps;
    if (more && ok) release_deferred(stream, 0);  // the LM head's, while the token comes (none after a failure: drain)
    if (ok && (more || blockIdx.x == 0)) ok = next_token(b, s_state, step, last, s_token);
    if (blockIdx.x == 0) b.trace.end(step, 0, kPhaseSample);
  }
  if (!ok && threadIdx.x == 0) stream.ring.drain();
  cluster_sync();  // no block leaves while a peer may still push into its shared memory
}

}  // namespace

ClusterSmem cluster_ring_slots(const SpGraphParams& p, uint32_t score_positions, uint32_t kv_positions, size_t bytes) {
  uint32_t slots = 0, mlp_slots = 0;
  while (layout(p, score_positions, kv_positions, slots + 1).end <= bytes) ++slots;
  while (mlp_only_layout(p, mlp_slots + 1).end <= bytes) ++mlp_slots;
  return {bytes, slots, mlp_slots};
}

ClusterSmem cluster_kernel_smem(const SpGraphParams& p, uint32_t score_positions, uint32_t kv_positions,
                                size_t limit) {
  cudaFuncAttributes kernel{};  // its static shared memory counts against the same limit
  SP_CUDA(cudaFuncGetAttributes(&kernel, cluster_kernel));
  const size_t dynamic_limit = limit > kernel.sharedSizeBytes ? limit - kernel.sharedSizeBytes : 0;
  return cluster_ring_slots(p, score_positions, kv_positions, dynamic_limit);
}

namespace {
cudaLaunchConfig_t launch_config(uint32_t clusters, size_t smem, cudaStream_t stream, cudaLaunchAttribute& cluster) {
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = kClusterRanks;
  cluster.val.clusterDim.y = cluster.val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(clusters * kClusterRanks);
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = &cluster;
  cfg.numAttrs = 1;
  return cfg;
}
}  // namespace

uint32_t cluster_kernel_max_clusters(size_t smem) {
  SP_CUDA(cudaFuncSetAttribute(cluster_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  cudaLaunchAttribute cluster{};
  const cudaLaunchConfig_t cfg = launch_config(1, smem, nullptr, cluster);
  int clusters = 0;
  SP_CUDA(cudaOccupancyMaxActiveClusters(&clusters, cluster_kernel, &cfg));
  return uint32_t(clusters);
}

void launch_cluster_kernel(const ClusterProgram& program, const ClusterLaunch& launch, size_t smem,
                           cudaStream_t stream) {
  cudaLaunchAttribute cluster{};
  const cudaLaunchConfig_t cfg = launch_config(launch.clusters, smem, stream, cluster);
  cuda_check(cudaLaunchKernelEx(&cfg, cluster_kernel, program, launch), "cluster_kernel<<<>>>");
}

}  // namespace spindle::cuda

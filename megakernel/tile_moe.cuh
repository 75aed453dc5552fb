// The routed experts' tiles (tasks/opcodes.h SP_OP_EXPERT_GATE_UP, SP_OP_EXPERT_DOWN,
// SP_OP_EXPERT_DOWN_SHARED, and the down in pieces, SP_OP_EXPERT_DOWN_PIECE and
// SP_OP_EXPERT_DOWN_SUM; the router's rows are run_gemv's, tile_projection.cuh), bit for bit
// ops/moe.h's: the projection tiles' warp-per-row canonical dots, the rows of the experts the
// routing names found as the tile runs, each gate/up task routing the token from the router's
// logits itself. Routed weights have no static span, so nothing of them is preloaded or
// prefetched to L2.
#pragma once
#include <stdint.h>

#include "megakernel/device_dot.cuh"
#include "megakernel/device_failure.cuh"
#include "megakernel/tile_layout.h"
#include "megakernel/tile_projection.cuh"
#include "ops/context.h"
#include "ops/moe.h"
#include "tasks/op_params.h"

namespace spindle::cuda {

// Every thread: starts copying the k routing slots into `slots` (shared memory), complete
// after cp_async_wait_all, so that no row's address waits on a load from global memory and the
// copy shares its round trip with the task's other staging.
__device__ inline void start_routing_copy(const uint32_t* routing, const SpMoeParams& p, RoutingSlot* slots) {
  stage_to_shared<Src::Data>(reinterpret_cast<const bf16*>(routing), reinterpret_cast<bf16*>(slots), 4u * p.slots);
}

// Every thread, once the slots are staged and a barrier passed, before any routed row is read:
// whether each names one of the E experts (a graph whose routing no expert gate/up task writes
// would read past the fused weights); if not, thread 0 reports the first slot that does not, as
// ops/run_task.h routing_slots throws.
__device__ inline bool routing_in_range(const RoutingSlot* slots, const SpMoeParams& p, const TaskSite& site) {
  for (uint32_t s = 0; s < p.slots; ++s)
    if (slots[s].expert >= p.experts) {
      if (threadIdx.x == 0) fail_task(site, kFailExpertRange, slots[s].expert, p.experts, s);
      return false;
    }
  return true;
}

// Every thread: the places of the E logits staged at `logits` (ops/moe.h route_place, its
// choice), the k chosen experts into slots[place].expert, in two short rounds rather than a
// count over all E experts a thread. Each expert's order as one 64-bit word (route_key above
// its complemented index, so a tie goes to the lower expert and a pad past E comes after every
// expert); (1) each group of 32 experts, a warp's lanes, ranks its own by shuffles and offers
// its first c = min(k, 32) to `cands` (route_group_candidates); (2) a thread a candidate counts the
// candidates before it. That count is the place of an expert whose place is below k (its
// predecessors come before it in their own groups too, so each is a candidate), and at least k
// for any other (a group holding m of its predecessors offers min(m, c) of them). A barrier
// between the rounds, and one after: the slots are complete on return.
__device__ inline void route_places(const float* logits, uint64_t* cands, const SpMoeParams& p, RoutingSlot* slots) {
  const uint32_t E = p.experts, c = route_group_candidates(p.slots), groups = (E + 31) / 32;
  for (uint32_t g = warp_id(); g < groups; g += warps_per_block()) {
    const uint32_t e = g * 32 + lane_id();
    const uint64_t v = uint64_t(e < E ? route_key(logits[e]) : 0u) << 32 | ~e;
    uint32_t rank = 0;
#pragma unroll 8
    for (uint32_t j = 0; j < 32; ++j) rank += __shfl_sync(~0u, v, j) > v;
    if (rank < c) cands[g * c + rank] = v;
  }
  __syncthreads();
  const uint32_t n = groups * c;
  for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
    const uint64_t v = cands[i];
    uint32_t place = 0;
#pragma unroll 8
    for (uint32_t j = 0; j < n; ++j) place += cands[j] > v;
    const uint32_t e = ~uint32_t(v);
    if (place < p.slots && e < E) slots[place].expert = e;
  }
  __syncthreads();
}

// Every thread, after route_places: the k slots' weights (ops/moe.h route) into `out`, the
// logits turned into exp(logit − top) in place, then warp 0's lanes each sum them alike
// (route_sum, the loads vectorised ahead of the adds) and weigh a slot each
// (route_slot_weight), which they store with its expert.
__device__ inline void route_weights(float* logits, const SpMoeParams& p, const RoutingSlot* slots, RoutingSlot* out) {
  const uint32_t E = p.experts;
  const float top = logits[slots[0].expert];  // the first chosen's (validate() checked k >= 1)
  __syncthreads();
  for (uint32_t e = threadIdx.x; e < E; e += blockDim.x) logits[e] = pm_exp(logits[e] - top);
  __syncthreads();
  if (warp_id() != 0) return;
  float sum = 0.0f;
  uint32_t e = 0;
#pragma unroll 8
  for (; e + 4 <= E; e += 4) {  // the logits' offset is 16-byte aligned
    const float4 v = *reinterpret_cast<const float4*>(logits + e);
    sum = sum + v.x;
    sum = sum + v.y;
    sum = sum + v.z;
    sum = sum + v.w;
  }
  for (; e < E; ++e) sum = sum + logits[e];
  for (uint32_t s = lane_id(); s < p.slots; s += 32)
    out[s] = {slots[s].expert, route_slot_weight<float>(logits, sum, p.slots, p.flags & SP_MOE_NORMALISE, slots, s)};
}

// The routed experts' gate and up rows (ops/moe.h expert_gate_up_rows): the router's logits
// staged with the input and routed in shared memory (route_places), then tile t is row t % Im of
// slot t / Im, a warp's tiles taken as run_gate_up takes its rows. The task of tile 0 also
// weighs the slots and stores the routing EXPERT_DOWN reads (route_weights), before its rows:
// stored after them, it made that task the stage's last by ~2 µs, and down waits for it
// (docs/EXPERIMENTS.md).
__device__ inline void run_expert_gate_up(const SpTask& t, const TileContext& c, uint8_t* smem) {
  const SpMoeParams& p = operand_params<SpMoeParams>(t, c, 5);  // validate() checked it
  const SpView& W = c.views[t.operand[0]];
  const uint32_t K = W.cols, Im = p.expert_rows, stride = warps_per_block();
  RoutingSlot* slots = reinterpret_cast<RoutingSlot*>(smem + projection_smem_bytes(K));
  float* logits = reinterpret_cast<float*>(smem + expert_gate_up_logits_offset(K, p.slots));
  uint64_t* cands = reinterpret_cast<uint64_t*>(smem + expert_gate_up_candidates_offset(K, p.slots, p.experts));
  stage_to_shared<Src::Data>(view_data<const bf16>(c, t.operand[6]), reinterpret_cast<bf16*>(logits), 2u * p.experts);
  const bf16* n = projection_input(view_data<const bf16>(c, t.operand[1]), K, view_data<const bf16>(c, t.operand[2]),
                                   *c.params, smem, nullptr);  // waits for the logits' copy too
  route_places(logits, cands, p, slots);
  if (t.tile_begin == 0) route_weights(logits, p, slots, view_data<RoutingSlot>(c, t.operand[3]));
  const bf16* w = view_data<const bf16>(c, t.operand[0]);
  bf16* act = view_data<bf16>(c, t.operand[4]);
  const size_t act_stride = c.views[t.operand[4]].row_stride;
  for_row_groups<kGateUpGroupRows>(t.tile_begin + warp_id(), t.tile_end, stride, [&]<int R>(uint32_t t0) {
    const bf16* rows[2 * R];  // gate and up of each tile
    for (int i = 0; i < R; ++i) {
      const uint32_t tile = t0 + i * stride;
      rows[2 * i] = w + (size_t(slots[tile / Im].expert) * 2 * Im + tile % Im) * W.row_stride;
      rows[2 * i + 1] = rows[2 * i] + size_t(Im) * W.row_stride;
    }
    float dots[2 * R];
    warp_dot_rows<Src::Weight, Src::Shared, 2 * R, chunks_in_flight(2 * R)>(rows, n, K, dots);
    if (lane_id() != 0) return;
    for (int i = 0; i < R; ++i) {
      const uint32_t tile = t0 + i * stride;
      act[(tile / Im) * act_stride + tile % Im] = swiglu(rounded(dots[2 * i]), rounded(dots[2 * i + 1]));
    }
  });
}

// The routed experts' down rows summed into the residual (ops/moe.h expert_down_rows): the
// routing, the k activation rows and the task's rows of the residual staged in shared memory
// (one round trip, not one a row at its end), then each warp's rows one by one, the slots' dots
// of a row in flight together (each expert's row against its slot's activations), added to the
// row's sum in slot order. EXPERT_DOWN_SHARED (`with_shared`, which only the copy built
// kSharedToo runs, as it runs EXPERT_DOWN's tasks too): its shared expert's activations are
// staged after the slots' and its gated row joins the sum (its gate read once, with the staging).
template <bool kSharedToo>
__device__ inline void run_expert_down(const SpTask& t, const TileContext& c, uint8_t* smem, const TaskSite& site) {
  const bool with_shared = kSharedToo && t.op == SP_OP_EXPERT_DOWN_SHARED;
  const SpMoeParams& p = operand_params<SpMoeParams>(t, c, 4);  // validate() checked it
  const SpView& W = c.views[t.operand[0]];
  const uint32_t Im = p.expert_rows, H = W.rows / p.experts, a_stride = expert_act_stride(Im);
  const uint32_t Is = with_shared ? c.views[t.operand[5]].cols : 0;
  bf16* a = reinterpret_cast<bf16*>(smem + expert_down_act_offset(p.slots));
  const bf16* act = view_data<const bf16>(c, t.operand[1]);
  const size_t act_stride = c.views[t.operand[1]].row_stride;
  for (uint32_t s = 0; s < p.slots; ++s) stage_to_shared<Src::Data>(act + s * act_stride, a + s * a_stride, Im);
  bf16* shared_act = reinterpret_cast<bf16*>(smem + expert_down_shared_act_offset(p.slots, Im));
  if (with_shared) stage_to_shared<Src::Data>(view_data<const bf16>(c, t.operand[6]), shared_act, Is);
  bf16* hidden = view_data<bf16>(c, t.operand[3]);
  bf16* residual = reinterpret_cast<bf16*>(smem + expert_down_residual_offset(p.slots, Im, Is));
  stage_to_shared<Src::Data>(hidden + t.tile_begin, residual, t.tile_end - t.tile_begin);
  RoutingSlot* slots = reinterpret_cast<RoutingSlot*>(smem + kTileScratchBytes);
  start_routing_copy(view_data<const uint32_t>(c, t.operand[2]), p, slots);
  const bf16 shared_gate = with_shared ? load_bf16<Src::Data>(view_data<const bf16>(c, t.operand[7])) : bf16{};
  cp_async_wait_all();
  __syncthreads();
  if (!routing_in_range(slots, p, site)) return;
  const bf16* w = view_data<const bf16>(c, t.operand[0]);
  for (uint32_t r = t.tile_begin + warp_id(); r < t.tile_end; r += warps_per_block()) {
    float m = 0.0f;
    for_row_groups<kGemvGroupRows>(0, p.slots, 1, [&]<int R>(uint32_t s0) {
      const bf16* rows[R];
      const bf16* acts[R];
      for (int i = 0; i < R; ++i) {
        rows[i] = w + (size_t(slots[s0 + i].expert) * H + r) * W.row_stride;
        acts[i] = a + (s0 + i) * a_stride;
      }
      float y[R];
      warp_dot_rows<Src::Weight, Src::Shared, R, chunks_in_flight(R)>(rows, acts, Im, y);
      for (int i = 0; i < R; ++i) m = m + rounded(slots[s0 + i].weight * rounded(y[i]));
    });
    float f = rounded(m);
    if (with_shared) {
      const float y = warp_dot<Src::Weight, Src::Shared>(
          view_data<const bf16>(c, t.operand[5]) + size_t(r) * c.views[t.operand[5]].row_stride, shared_act, Is);
      f = add_shared_expert(f, rounded(y), shared_gate);
    }
    if (lane_id() == 0) hidden[r] = to_bf16(widen<float>(residual[r - t.tile_begin]) + f);
  }
}

// Every thread, once the tile's other staging has started: the router's logits (operand
// k_logits) staged at `logits` with it, waited for, and the k experts they route to into
// `slots` (route_places; `cands` its scratch), complete on return.
__device__ inline void route_from_logits(const SpTask& t, const TileContext& c, uint32_t k_logits, const SpMoeParams& p,
                                         float* logits, uint64_t* cands, RoutingSlot* slots) {
  stage_to_shared<Src::Data>(view_data<const bf16>(c, t.operand[k_logits]), reinterpret_cast<bf16*>(logits),
                             2u * p.experts);
  cp_async_wait_all();
  __syncthreads();
  route_places(logits, cands, p, slots);
}

// A piece of the routed experts' down dots (ops/moe.h expert_down_piece_rows): the k slots'
// activations of the piece staged, the token routed from the logits, then each warp's rows one
// by one, each held slot's dot (its expert's row of the piece against its activations) into
// its column of the piece's partial row, f32.
__device__ inline void run_expert_down_piece(const SpTask& t, const TileContext& c, uint8_t* smem) {
  const SpMoeParams& p = operand_params<SpMoeParams>(t, c, 4);  // validate() checked it
  const SpView& W = c.views[t.operand[0]];
  const uint32_t P = W.cols, H = W.rows / p.experts, a_stride = expert_act_stride(P);
  RoutingSlot* slots = reinterpret_cast<RoutingSlot*>(smem + kTileScratchBytes);
  float* logits = reinterpret_cast<float*>(smem + routed_logits_offset(p.slots));
  uint64_t* cands = reinterpret_cast<uint64_t*>(smem + routed_candidates_offset(p.slots, p.experts));
  bf16* a = reinterpret_cast<bf16*>(smem + routed_rows_offset(p.slots, p.experts));
  const bf16* act = view_data<const bf16>(c, t.operand[1]);
  const size_t act_stride = c.views[t.operand[1]].row_stride;
  for (uint32_t s = 0; s < p.slots; ++s) stage_to_shared<Src::Data>(act + s * act_stride, a + s * a_stride, P);
  route_from_logits(t, c, 2, p, logits, cands, slots);
  const HeldExperts held{p.held_first, p.held_count};
  const bf16* w = view_data<const bf16>(c, t.operand[0]);
  float* partial = view_data<float>(c, t.operand[3]) + size_t(t.operand[5]) * c.views[t.operand[3]].row_stride;
  for (uint32_t r = t.tile_begin + warp_id(); r < t.tile_end; r += warps_per_block())
    for (uint32_t s = 0; s < p.slots; ++s) {
      if (!held.holds(slots[s].expert)) continue;
      const float y =
          warp_dot<Src::Weight, Src::Shared>(w + (size_t(slots[s].expert) * H + r) * W.row_stride, a + s * a_stride, P);
      if (lane_id() == 0) partial[size_t(s) * H + r] = y;
    }
}

// The pieces summed into the residual (ops/moe.h expert_down_sum_rows): the token routed and
// weighed from the logits (route_places, route_weights), then each warp's rows one by one: each
// slot's pieces summed as a split GEMV sums them, rounded, weighed and added in slot order, and
// the shared expert's term from its down rows (its activations staged) or its dots' pieces
// (summed as its own split says: shared_pieces_split).
__device__ inline void run_expert_down_sum(const SpTask& t, const TileContext& c, uint8_t* smem) {
  const SpMoeParams& p = operand_params<SpMoeParams>(t, c, 3);  // validate() checked it
  const GemvSplit split = gemv_split(t.operand[4]);
  const SpView& pv = c.views[t.operand[0]];
  const uint32_t H = pv.cols / p.slots;
  const bool shared = t.operand[5] != SP_NO_VIEW;
  const bool shared_pieces = shared && c.views[t.operand[5]].dtype == SP_F32;
  const GemvSplit shared_split = shared_pieces_split(t.operand[4], p);
  const uint32_t Is = shared && !shared_pieces ? c.views[t.operand[5]].cols : 0;
  RoutingSlot* slots = reinterpret_cast<RoutingSlot*>(smem + kTileScratchBytes);
  RoutingSlot* weighed = slots + p.slots;
  float* logits = reinterpret_cast<float*>(smem + routed_logits_offset(p.slots));
  uint64_t* cands = reinterpret_cast<uint64_t*>(smem + routed_candidates_offset(p.slots, p.experts));
  bf16* shared_act = reinterpret_cast<bf16*>(smem + routed_rows_offset(p.slots, p.experts));
  if (Is) stage_to_shared<Src::Data>(view_data<const bf16>(c, t.operand[6]), shared_act, Is);
  const bf16 shared_gate = shared ? load_bf16<Src::Data>(view_data<const bf16>(c, t.operand[7])) : bf16{};
  route_from_logits(t, c, 1, p, logits, cands, slots);
  route_weights(logits, p, slots, weighed);
  __syncthreads();
  const float* partials = view_data<const float>(c, t.operand[0]);
  bf16* hidden = view_data<bf16>(c, t.operand[2]);
  for (uint32_t r = t.tile_begin + warp_id(); r < t.tile_end; r += warps_per_block()) {
    float m = 0.0f;
    for (uint32_t s = 0; s < p.slots; ++s) {
      const float y = rounded(split_sum<float>(
          split, [&](uint32_t j) { return load_data(partials + j * pv.row_stride + size_t(s) * H + r); }));
      m = m + rounded(weighed[s].weight * y);
    }
    float f = rounded(m);
    if (shared) {
      const SpView& sv = c.views[t.operand[5]];
      const float y =
          shared_pieces
              ? split_sum<float>(shared_split, [&](uint32_t j) {
                  return load_data(view_data<const float>(c, t.operand[5]) + j * sv.row_stride + r);
                })
              : warp_dot<Src::Weight, Src::Shared>(view_data<const bf16>(c, t.operand[5]) + size_t(r) * sv.row_stride,
                                                    shared_act, Is);
      f = add_shared_expert(f, rounded(y), shared_gate);
    }
    if (lane_id() == 0) hidden[r] = to_bf16(widen<float>(load_bf16<Src::Data>(hidden + r)) + f);
  }
}

}  // namespace spindle::cuda

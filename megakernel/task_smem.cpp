#include "megakernel/task_smem.h"

#include "megakernel/tile_layout.h"
#include "ops/attention.h"
#include "tasks/opcodes.h"

namespace spindle::cuda {

size_t task_smem_bytes(const Graph& g, const SpTask& t, uint32_t score_positions, uint32_t kv_positions) {
  const SpGraphParams& p = g.params;
  switch (t.op) {
    case SP_OP_GEMV:
    case SP_OP_GATE_UP:
    case SP_OP_GEMV_PIECE:
    case SP_OP_PIECE_DOTS:
    case SP_OP_ROUTER: return projection_smem_bytes(g.views[t.operand[0]].cols);
    case SP_OP_ATTENTION:
    case SP_OP_GATED_ATTENTION:
      return attn_smem_bytes(attn_tile_heads(p), p.head_dim, p.rotary_dim, score_positions, kv_positions,
                             p.attn_chunks, g.views[t.operand[5]].row_stride);
    case SP_OP_MLP: return mlp_smem_bytes(g.views[t.operand[2]].rows, t.tile_end - t.tile_begin);
    case SP_OP_EXPERT_GATE_UP: {
      const SpMoeParams& moe = sp_op_record<SpMoeParams>(g.op_params[t.operand[5]]);
      return expert_gate_up_smem_bytes(g.views[t.operand[0]].cols, moe.slots, moe.experts);
    }
    case SP_OP_EXPERT_DOWN:
    case SP_OP_EXPERT_DOWN_SHARED: {
      const SpMoeParams& moe = sp_op_record<SpMoeParams>(g.op_params[t.operand[4]]);
      const uint32_t shared_cols = t.op == SP_OP_EXPERT_DOWN_SHARED ? g.views[t.operand[5]].cols : 0;
      return expert_down_smem_bytes(moe.slots, moe.expert_rows, shared_cols, t.tile_end - t.tile_begin);
    }
    case SP_OP_EXPERT_DOWN_PIECE: {
      const SpMoeParams& moe = sp_op_record<SpMoeParams>(g.op_params[t.operand[4]]);
      return routed_rows_offset(moe.slots, moe.experts) +
             size_t(moe.slots) * expert_act_stride(g.views[t.operand[0]].cols) * 2u;
    }
    case SP_OP_EXPERT_DOWN_SUM: {
      const SpMoeParams& moe = sp_op_record<SpMoeParams>(g.op_params[t.operand[3]]);
      const bool shared_rows = t.operand[5] != SP_NO_VIEW && g.views[t.operand[5]].dtype == SP_BF16;
      return routed_rows_offset(moe.slots, moe.experts) + align16(shared_rows ? g.views[t.operand[5]].cols * 2u : 0u);
    }
    case SP_OP_GDN: return gdn_smem_bytes();
    default: return kTileScratchBytes;
  }
}

}  // namespace spindle::cuda

// The task descriptor: one fixed-size record of 16 little-endian 32-bit words.
// Plain data with no pointers, so the same bytes serve the CPU executors, the CUDA
// megakernel and the Vulkan shader, and a graph file is just these records.
#pragma once
#include <stdint.h>

#include "tasks/opcodes.h"

#define SP_TASK_WORDS 16u
#define SP_TASK_OPERANDS 8u
#define SP_NO_COUNTER 0xFFFFFFFFu
#define SP_NO_VIEW 0xFFFFFFFFu

// How a task's wait target depends on the step being run (counters are never reset).
#define SP_WAIT_SAME_STEP 0u  // wait for counter >= count * (step + 1)
#define SP_WAIT_PREV_STEP 1u  // wait for counter >= count * step (the previous step's stage)

struct SpTask {
  uint32_t op;              // SpOpcode
  uint32_t layer;           // decoder layer, or 0xFFFFFFFF for model-level tasks
  uint32_t tile_begin;      // first tile (row, head, chunk…) this task computes
  uint32_t tile_end;        // one past the last tile
  uint32_t wait_counter;    // counter to wait on, or SP_NO_COUNTER
  uint32_t wait_count;      // signals that counter receives per step
  uint16_t wait_mode;       // SP_WAIT_SAME_STEP or SP_WAIT_PREV_STEP
  uint8_t gang_width;       // members of the record's gang, 0 or 1: none (tasks/gang.h, docs/isa.md)
  uint8_t gang_rank;        // this record's rank in its gang
  uint32_t signal_counter;  // counter to release-add 1 on completion
  uint32_t operand[SP_TASK_OPERANDS];  // view ids or immediates; meaning per opcode (opcodes.h)
};

#ifdef __cplusplus
static_assert(sizeof(SpTask) == SP_TASK_WORDS * 4, "SpTask must stay 16 words");
#endif

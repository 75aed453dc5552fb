// Per-step values that tasks read, and that the SAMPLE task advances, so one graph serves
// every decode step and a device can run several steps without the host.
#pragma once
#include <stdint.h>

struct SpStepState {
  uint32_t token;          // input token of the step being run
  uint32_t position;       // its position (tokens already in the cache)
  uint32_t step;           // steps completed since the run started
  uint32_t forced_count;   // step s feeds forced[s+1] while s+1 < forced_count (prompt)
  uint32_t seed_lo;        // sampling seed
  uint32_t seed_hi;
  float temperature;       // 0 selects greedy argmax
  uint32_t top_k;          // 0 disables
  float top_p;             // 1 disables
  uint32_t nonfinite_step; // 1 + the first step whose logits were not all finite; 0 while none
                           // was (the SAMPLE task notes it, the decode loop reports it)
  uint32_t reserved[6];
};

// Layout of the STATE arena: the state, then forced tokens, then out tokens.
#define SP_STATE_FORCED_OFFSET 64u

#ifdef __cplusplus
static_assert(sizeof(SpStepState) == SP_STATE_FORCED_OFFSET, "SpStepState must stay 16 words");
#endif

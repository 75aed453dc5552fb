// The decode loop around an executor: prefill (the prompt fed through the same graph token by
// token), generation, and teacher forcing for the KL gate.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "host/executor.h"

namespace spindle {

struct SamplingOptions {
  float temperature = 0.0f;  // 0 = greedy
  uint32_t top_k = 0;        // 0 = off
  float top_p = 1.0f;        // 1 = off
  uint64_t seed = 0;
};

// What a generation does with each new token as its step ends: `on_token` sees it (text printed
// as it is generated), and a token in `stop_ids` (the checkpoint's EOS ids) ends the generation
// after it. Either one makes the generation run a step at a time; with neither, all steps run
// in one call of the executor.
struct TokenStream {
  std::function<void(uint32_t)> on_token;
  std::vector<uint32_t> stop_ids;
};

struct DecodeResult {
  std::vector<uint32_t> tokens;  // the generated tokens only, a stop id that ended them included
  bool stopped = false;          // a stop id ended the generation before max_new_tokens
  double prefill_seconds = 0;
  double decode_seconds = 0;     // generation steps only
  double tokens_per_s = 0;
};

// Checks ids against the vocab and the graph's context, then runs the prompt and
// `max_new_tokens` generation steps, the prompt's first token at `start_position` (the KV rows
// before it hold whatever earlier runs wrote, zeros at first: the memory traffic of a prefix
// of that length, not its values). Throws spindle::Error on bad input, and on a step whose
// logits were not all finite (require_finite_logits).
DecodeResult decode(Executor& ex, const Graph& g, const std::vector<uint32_t>& prompt,
                    uint32_t max_new_tokens, const SamplingOptions& s, uint32_t start_position = 0,
                    const TokenStream& stream = {});

// Throws spindle::Error naming the step and its position when a step the executor ran since
// the state was last reset noted logits that were not all finite (ops/sample.h
// note_nonfinite_logits); `start_position` is the position of that run's first step.
void require_finite_logits(Executor& ex, uint32_t start_position);

// Feeds `ids` and returns the logits after each prefix: row t is the distribution after
// ids[0..t]. Throws spindle::Error on logits that are not all finite, as decode does.
std::vector<std::vector<float>> teacher_forced_logits(Executor& ex, const Graph& g,
                                                      const std::vector<uint32_t>& ids);

}  // namespace spindle

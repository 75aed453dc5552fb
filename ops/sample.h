// SAMPLE (docs/numerics.md): the next token, greedy from the argmax partials or seeded
// temperature / top-k / top-p sampling from the logits, then the step-state advance.
#pragma once
#include <stdint.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/argmax.h"
#include "ops/pmath.h"
#include "tasks/host_device.h"
#include "tasks/step_state.h"

namespace spindle {

// splitmix64's output for state x (the golden-gamma increment, then the mix).
SP_HDI uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The uniform draw in [0, 1) of step `step`: the top 24 bits of the hash, times 2^-24.
SP_HDI float sample_uniform(uint64_t seed, uint32_t step) {
  const uint64_t z = splitmix64(seed ^ (uint64_t(step) * 0x9E3779B97F4A7C15ull));
  return float(uint32_t(z >> 40)) * (1.0f / 16777216.0f);
}

SP_HDI uint64_t sampling_seed(const SpStepState& s) { return (uint64_t(s.seed_hi) << 32) | s.seed_lo; }

// Draws a token with uniform u from the non-NaN logits: candidates in (logit desc, index asc)
// order, the first top_k of them (0 = all), weights exp((l - l_max) / T), the shortest prefix
// whose running weight reaches top_p of the total, then the first candidate whose running
// weight exceeds u times the prefix's. A non-finite top logit picks the top candidate.
template <class Acc>
uint32_t sample_from_logits(const float* logits, uint32_t V, float temperature, uint32_t top_k,
                            float top_p, Acc u) {
  std::vector<uint32_t> order;
  order.reserve(V);
  for (uint32_t i = 0; i < V; ++i)
    if (logits[i] == logits[i]) order.push_back(i);
  if (order.empty()) return 0;  // all NaN: what the greedy path returns too
  const auto before = [logits](uint32_t a, uint32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  const size_t k = top_k == 0 || top_k >= order.size() ? order.size() : top_k;
  if (k < order.size()) {
    std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
    order.resize(k);
  } else {
    std::sort(order.begin(), order.end(), before);
  }
  const Acc top = Acc(logits[order[0]]);
  if (!std::isfinite(top)) return order[0];

  std::vector<Acc> w(k);
  Acc total = 0;
  for (size_t i = 0; i < k; ++i) {
    w[i] = pm_exp((Acc(logits[order[i]]) - top) / Acc(temperature));
    total = total + w[i];
  }
  const Acc threshold = Acc(top_p) * total;
  size_t kept = 0;
  Acc kept_sum = 0;
  while (kept < k) {
    kept_sum = kept_sum + w[kept++];
    if (kept_sum >= threshold) break;
  }
  const Acc target = u * kept_sum;
  Acc running = 0;
  for (size_t i = 0; i < kept; ++i) {
    running = running + w[i];
    if (running > target) return order[i];
  }
  return order[kept - 1];
}

// Step s feeds the forced token s+1 while there is one (the prompt).
SP_HDI bool step_is_forced(const SpStepState& s) { return s.step + 1 < s.forced_count; }

// Makes `next` the input of step s+1.
SP_HDI void advance_state(SpStepState& s, uint32_t next) {
  s.token = next;
  s.position += 1;
  s.step += 1;
}

// Records `next` as step s's output and makes it the input of step s+1.
SP_HDI void advance_step(SpStepState& s, uint32_t next, uint32_t* out_tokens) {
  out_tokens[s.step] = next;
  advance_state(s, next);
}

// Notes step s in the state when the best of its logits (the reduced argmax partials) marks
// one that is not finite, unless an earlier step was noted: forced steps too, since their
// logits are what the KL gate compares.
SP_HDI void note_nonfinite_logits(SpStepState& s, const ArgmaxPartial& best) {
  if (argmax_marks_nonfinite(best) && s.nonfinite_step == 0) s.nonfinite_step = s.step + 1;
}

// The whole SAMPLE task: chooses the next token and advances the state.
template <class Acc>
void sample_step(const float* logits, uint32_t V, const ArgmaxPartial* partials,
                 uint32_t n_partials, const uint32_t* forced_tokens, uint32_t* out_tokens,
                 SpStepState& s) {
  const ArgmaxPartial best = argmax_of_partials(partials, n_partials);
  note_nonfinite_logits(s, best);
  uint32_t next;
  if (step_is_forced(s)) {
    next = forced_tokens[s.step + 1];
  } else if (!(s.temperature > 0.0f)) {
    next = best.index;
  } else {
    const Acc u = Acc(sample_uniform(sampling_seed(s), s.step));
    next = sample_from_logits<Acc>(logits, V, s.temperature, s.top_k, s.top_p, u);
  }
  advance_step(s, next, out_tokens);
}

}  // namespace spindle

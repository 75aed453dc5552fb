#include "host/decode.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <sstream>
#include <string>

#include "tasks/error.h"

namespace spindle {
namespace {

void check_ids(const Graph& g, const std::vector<uint32_t>& ids, uint64_t extra, const char* what,
               uint32_t start_position = 0) {
  if (ids.empty()) throw Error(std::string(what) + " is empty: give at least one token id");
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] >= g.params.vocab)
      throw Error(std::string(what) + " id " + std::to_string(ids[i]) + " at index " + std::to_string(i) +
                  " is out of range: the vocabulary has " + std::to_string(g.params.vocab) + " tokens");
  const uint64_t steps = ids.size() + extra, need = start_position + steps;
  if (need > g.params.context)
    throw Error(std::string(what) + " of " + std::to_string(ids.size()) + " tokens plus " + std::to_string(extra) +
                " new tokens" + (start_position ? " from position " + std::to_string(start_position) : "") +
                " needs " + std::to_string(need) + " positions, past the context limit of " +
                std::to_string(g.params.context));
  if (steps > g.params.max_steps)
    throw Error("the run needs " + std::to_string(steps) + " steps but the graph holds " +
                std::to_string(g.params.max_steps));
}

// Starts a sequence: the next step feeds ids[0] at `position` from an empty recurrent state.
void start(Executor& ex, const std::vector<uint32_t>& ids, const SamplingOptions& s, uint32_t position = 0) {
  ex.clear_recurrent_state();
  SpStepState& st = ex.state();
  st = SpStepState{};
  st.token = ids[0];
  st.position = position;
  st.forced_count = uint32_t(ids.size());
  st.seed_lo = uint32_t(s.seed);
  st.seed_hi = uint32_t(s.seed >> 32);
  st.temperature = s.temperature;
  st.top_k = s.top_k;
  st.top_p = s.top_p;
  std::copy(ids.begin(), ids.end(), ex.forced_tokens().begin());
}

// Steps run since start() at `position`: a step's logits that were not all finite are an error.
void run(Executor& ex, uint32_t steps, uint32_t position) {
  ex.run_steps(steps);
  require_finite_logits(ex, position);
}

// 0.5 → "0.5", NaN → "nan": a value as the user would have typed it.
std::string shortest(float v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

void require_finite_logits(Executor& ex, uint32_t start_position) {
  const uint32_t noted = ex.state().nonfinite_step;
  if (noted == 0) return;
  const uint32_t step = noted - 1;
  throw Error("the logits of step " + std::to_string(step) + " (position " + std::to_string(uint64_t(start_position) + step) +
              ") are not all finite (NaN or infinite): the weights hold such values, or an activation overflowed");
}

DecodeResult decode(Executor& ex, const Graph& g, const std::vector<uint32_t>& prompt, uint32_t max_new_tokens,
                    const SamplingOptions& s, uint32_t start_position, const TokenStream& stream) {
  check_ids(g, prompt, max_new_tokens, "prompt", start_position);
  if (!(s.temperature >= 0)) throw Error("temperature must be >= 0, not " + shortest(s.temperature));
  if (!(s.top_p > 0 && s.top_p <= 1)) throw Error("top-p must be in (0, 1], not " + shortest(s.top_p));
  start(ex, prompt, s, start_position);
  DecodeResult r;
  // Step s feeds token s; the last prompt token's step yields the first new token.
  const uint32_t prefill_steps = uint32_t(prompt.size()) - 1;
  auto t0 = std::chrono::steady_clock::now();
  if (prefill_steps) run(ex, prefill_steps, start_position);
  r.prefill_seconds = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  if (stream.on_token || !stream.stop_ids.empty()) {
    for (uint32_t i = 0; i < max_new_tokens && !r.stopped; ++i) {
      run(ex, 1, start_position);
      const uint32_t token = ex.out_tokens()[prefill_steps + i];
      r.tokens.push_back(token);
      if (stream.on_token) stream.on_token(token);
      r.stopped = std::find(stream.stop_ids.begin(), stream.stop_ids.end(), token) != stream.stop_ids.end();
    }
  } else {
    if (max_new_tokens) run(ex, max_new_tokens, start_position);
    const auto out = ex.out_tokens();
    r.tokens.assign(out.begin() + prefill_steps, out.begin() + prefill_steps + max_new_tokens);
  }
  r.decode_seconds = seconds_since(t0);
  r.tokens_per_s = r.decode_seconds > 0 ? r.tokens.size() / r.decode_seconds : 0;
  return r;
}

std::vector<std::vector<float>> teacher_forced_logits(Executor& ex, const Graph& g, const std::vector<uint32_t>& ids) {
  check_ids(g, ids, 0, "ids");
  start(ex, ids, SamplingOptions{});
  std::vector<std::vector<float>> rows;
  for (size_t t = 0; t < ids.size(); ++t) {
    run(ex, 1, 0);
    const auto l = ex.logits();
    rows.emplace_back(l.begin(), l.end());
  }
  return rows;
}

}  // namespace spindle

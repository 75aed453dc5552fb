// Models whose logits are not all finite, and the error a decode on them ends with: what every
// executor's tests check (weights with NaN or infinities once decoded to a stream of token 0).
#pragma once
#include <string>
#include <vector>

#include "host/decode.h"
#include "tasks/error.h"
#include "tests/hand_built_models.h"

namespace spindle::test {

// tiny's shapes with near-one norms and small weights, and `bad` in one place: all of row 37
// of the LM head (one logit of each step), or, with `every_logit`, every weight of layer 1's
// down projection (every logit of each step).
inline ModelWeights model_with_bad_value(float bad, bool every_logit) {
  ModelWeights w = model_with("tiny-bad", 64, 16, 128, 16);
  const std::string name = every_logit ? "model.layers.1.mlp.down_proj.weight" : "lm_head.weight";
  const TensorRef& t = w.tensors.at(name);
  bf16* data = const_cast<bf16*>(reinterpret_cast<const bf16*>(w.arenas[t.arena].data + t.offset));
  const uint64_t first = every_logit ? 0 : 37 * t.shape[1], count = every_logit ? t.elements() : t.shape[1];
  for (uint64_t i = first; i < first + count; ++i) data[i] = f32_to_bf16(bad);
  return w;
}

// The message a decode of 3 new tokens after `prompt`, from position 4, ends with; "" for none.
inline std::string decode_error(const ModelWeights& w, const ExecutorOptions& o, const std::vector<uint32_t>& prompt) {
  const Graph g = short_context_graph(w);
  auto ex = make_executor(g, w, o);
  try {
    decode(*ex, g, prompt, 3, {}, 4);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// What every executor must say of both models, for NaN and both infinities: the first step of
// each decode (a prompt step, whose logits the KL gate reads, or a generated one).
inline void check_nonfinite_logits_refused(const ExecutorOptions& o) {
  const char* want = "the logits of step 0 (position 4) are not all finite";
  for (const float bad : {NAN, INFINITY, -INFINITY}) {
    CAPTURE(bad);
    CHECK(decode_error(model_with_bad_value(bad, false), o, {1, 2}).find(want) != std::string::npos);
    CHECK(decode_error(model_with_bad_value(bad, true), o, {1}).find(want) != std::string::npos);
  }
  CHECK(decode_error(model_with("tiny-fine", 64, 16, 128, 16), o, {1, 2}) == "");
}

}  // namespace spindle::test

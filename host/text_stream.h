// The text of a generation as its tokens arrive, for printing as they are generated: a
// character whose bytes are split across tokens is held back until its last byte comes.
#pragma once
#include <cstdint>
#include <string>

#include "host/tokenizer.h"

namespace spindle {

class TextStream {
 public:
  explicit TextStream(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  // The text that `id` completes (maybe none). An id the tokenizer does not have (a row of the
  // model's vocabulary past the tokenizer's, which a model may pad to) adds nothing, as the
  // Python library's decode skips it. The pieces push and finish return, joined, are
  // tokenizer.decode of the ids it has.
  std::string push(uint32_t id);
  // The held-back bytes of an unfinished character, as U+FFFD.
  std::string finish();

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;  // bytes of a character still arriving
};

}  // namespace spindle

// Tokenizer::load on arbitrary bytes (a checkpoint's tokenizer.json). A tokenizer it accepts
// must give back, from decode(encode(text)), a text of every kind: its vocabulary holds every
// byte (checked when it loads), merges only join tokens, and an id is one token.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "host/tokenizer.h"
#include "tasks/error.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = spindle::fuzz::write_input("tokenizer.json", data, size);
  try {
    const spindle::Tokenizer t = spindle::Tokenizer::load(path);
    // NFC leaves it as it is, so a normalizer cannot change it either.
    const std::string text = "Hello, world!  it's 42 \t\n\n 中文 😀 <|im_end|>x  ";
    if (t.decode(t.encode(text)) != text) {
      std::fprintf(stderr, "an accepted tokenizer does not give its text back\n");
      std::abort();
    }
  } catch (const spindle::Error&) {
  }
  return 0;
}

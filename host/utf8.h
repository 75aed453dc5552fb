// UTF-8 text as the tokenizer needs it: validity, Rust's lossy decoding (what the Python
// `tokenizers` library's byte-level decoder returns), the end of a partial character when bytes
// arrive a token at a time, and NFC normalization.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace spindle {

// The byte offset of the first byte that does not begin or continue a well-formed UTF-8
// sequence (a truncated sequence at the end counts), or std::string_view::npos when `text` is
// well-formed.
size_t first_invalid_utf8(std::string_view text);

// `bytes` with each ill-formed part replaced by U+FFFD, one for each maximal prefix of a
// well-formed sequence (Unicode's "substitution of maximal subparts", as Rust's
// String::from_utf8_lossy does).
std::string utf8_lossy(std::string_view bytes);

// The length of `bytes` less a trailing sequence that is well-formed so far but incomplete
// (the first bytes of a character whose other bytes have not arrived yet).
size_t complete_utf8_prefix(std::string_view bytes);

// The NFC (canonical composition) form of well-formed UTF-8 `text`, by utf8proc.
std::string nfc(std::string_view text);

}  // namespace spindle

#include "host/utf8.h"

#include <cstdint>
#include <cstdlib>
#include <memory>

#include <utf8proc.h>

#include "tasks/error.h"

namespace spindle {
namespace {

// How the sequence that starts at `at` reads: its length when well-formed, else how many bytes
// form the maximal prefix of a well-formed sequence (at least 1), and whether those bytes are
// an incomplete sequence cut by the end of `bytes`.
struct Sequence {
  size_t length = 1;
  bool well_formed = true;
  bool cut_by_end = false;
};

Sequence read_sequence(std::string_view bytes, size_t at) {
  const auto byte = [&](size_t i) { return uint8_t(bytes[i]); };
  const uint8_t lead = byte(at);
  if (lead < 0x80) return {};
  size_t need = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // the second byte's range (the table of Unicode's §3.9)
  if (lead >= 0xC2 && lead <= 0xDF) need = 2;
  else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 3;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 4;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    return {1, false, false};
  }
  for (size_t k = 1; k < need; ++k) {
    if (at + k >= bytes.size()) return {k, false, true};
    const uint8_t b = byte(at + k);
    const bool in_range = k == 1 ? b >= lo && b <= hi : b >= 0x80 && b <= 0xBF;
    if (!in_range) return {k, false, false};
  }
  return {need, true, false};
}

}  // namespace

size_t first_invalid_utf8(std::string_view text) {
  for (size_t at = 0; at < text.size();) {
    const Sequence s = read_sequence(text, at);
    if (!s.well_formed) return at;
    at += s.length;
  }
  return std::string_view::npos;
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t at = 0; at < bytes.size();) {
    const Sequence s = read_sequence(bytes, at);
    if (s.well_formed) out.append(bytes.substr(at, s.length));
    else out.append("\xEF\xBF\xBD");  // U+FFFD
    at += s.length;
  }
  return out;
}

size_t complete_utf8_prefix(std::string_view bytes) {
  // A character is at most 4 bytes, so only the last 3 can start one that is still arriving.
  const size_t from = bytes.size() > 3 ? bytes.size() - 3 : 0;
  for (size_t at = from; at < bytes.size(); ++at) {
    if ((uint8_t(bytes[at]) & 0xC0) == 0x80) continue;  // a continuation byte starts nothing
    const Sequence s = read_sequence(bytes, at);
    if (s.cut_by_end) return at;
  }
  return bytes.size();
}

std::string nfc(std::string_view text) {
  utf8proc_uint8_t* composed = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                          utf8proc_ssize_t(text.size()), &composed,
                                          utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(composed, &std::free);
  if (n < 0) throw Error(std::string("NFC normalization failed: ") + utf8proc_errmsg(n));
  return std::string(reinterpret_cast<const char*>(composed), size_t(n));
}

}  // namespace spindle

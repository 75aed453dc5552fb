#include "host/split_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tasks/error.h"

namespace spindle {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  const int n = pcre2_get_error_message(code, buffer, sizeof buffer);
  return n < 0 ? "PCRE2 error " + std::to_string(code) : std::string(reinterpret_cast<const char*>(buffer), size_t(n));
}

size_t utf8_char_length(uint8_t lead) { return lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2; }

}  // namespace

struct SplitRegex::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

SplitRegex::SplitRegex(const std::string& pattern, bool literal, const std::string& source)
    : compiled_(std::make_unique<Compiled>()) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0u);
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &error,
                                  &offset, nullptr);
  if (!compiled_->code)
    throw Error(source + ": the split pattern does not compile (PCRE2, at offset " + std::to_string(offset) +
                "): " + pcre2_message(error));
  // Without a JIT for this machine (PCRE2_ERROR_JIT_BADOPTION) the interpreter matches the same.
  pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE);
}

SplitRegex::~SplitRegex() = default;
SplitRegex::SplitRegex(SplitRegex&&) noexcept = default;
SplitRegex& SplitRegex::operator=(SplitRegex&&) noexcept = default;

std::vector<SplitRegex::Match> SplitRegex::matches(std::string_view text) const {
  std::vector<Match> found;
  const std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
      pcre2_match_data_create_from_pattern(compiled_->code, nullptr), &pcre2_match_data_free);
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  for (size_t at = 0; at <= text.size();) {
    // The caller has checked the text; PCRE2 need not check it again at every offset.
    const int rc = pcre2_match(compiled_->code, subject, text.size(), at, PCRE2_NO_UTF_CHECK, data.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) throw Error("the split pattern failed to match: " + pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
    const size_t begin = ovector[0], end = ovector[1];
    if (end > begin) {
      found.push_back({begin, end});
      at = end;
    } else {
      if (begin >= text.size()) break;
      at = begin + utf8_char_length(uint8_t(text[begin]));
    }
  }
  return found;
}

}  // namespace spindle

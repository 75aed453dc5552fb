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

// Unicode's White_Space, which is what \s means to Oniguruma, the regex engine of the Python
// library; PCRE2 with UCP also counts U+180E (a space before Unicode 6.3), which would split
// text differently.
constexpr const char* kWhiteSpace =
    R"(\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

// `pattern` with \s and \S spelled out as kWhiteSpace and its complement.
std::string spell_out_white_space(const std::string& pattern, const std::string& source) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char escaped = pattern[++i];
      if (escaped == 's') {
        out += in_class ? std::string(kWhiteSpace) : std::string("[") + kWhiteSpace + "]";
      } else if (escaped == 'S') {
        if (in_class) throw Error(source + ": \\S inside a character class is not supported");
        out += std::string("[^") + kWhiteSpace + "]";
      } else {
        out += c;
        out += escaped;
      }
      continue;
    }
    if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      const size_t end = pattern.find(":]", i + 2);  // a POSIX class, [:alpha:]
      const size_t stop = end == std::string::npos ? pattern.size() : end + 2;
      out.append(pattern, i, stop - i);
      i = stop - 1;
      continue;
    }
    out += c;
    if (!in_class && c == '[') {
      in_class = true;
      // A ']' first in a class (after any '^') is a literal, not its end.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
    } else if (in_class && c == ']') {
      in_class = false;
    }
  }
  return out;
}

}  // namespace

struct SplitRegex::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

SplitRegex::SplitRegex(const std::string& pattern, bool literal, const std::string& source)
    : compiled_(std::make_unique<Compiled>()) {
  int error = 0;
  PCRE2_SIZE offset = 0;  // of the pattern as spelled out, so not reported
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0u);
  const std::string compiled = literal ? pattern : spell_out_white_space(pattern, source);
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compiled.data()), compiled.size(), options, &error,
                                  &offset, nullptr);
  if (!compiled_->code)
    throw Error(source + ": the split pattern '" + pattern + "' does not compile (PCRE2): " + pcre2_message(error));
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

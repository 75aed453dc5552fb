// A pre-tokenizer's split pattern, compiled by PCRE2 with UTF and Unicode properties (UCP), so
// that \p{L}, \s and (?i:…) mean what they mean to the Python `tokenizers` library (\s spelled
// out as Unicode's White_Space, as its engine reads it); JIT-compiled where PCRE2 has a JIT for
// the machine.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace spindle {

class SplitRegex {
 public:
  struct Match {
    size_t begin = 0, end = 0;  // byte offsets
  };

  // `literal`: the pattern is a plain string to find, not a regex. `source` names where the
  // pattern came from in errors. Throws spindle::Error with PCRE2's message when the pattern
  // does not compile, and for \S inside a character class, which cannot be spelled out.
  SplitRegex(const std::string& pattern, bool literal, const std::string& source);
  ~SplitRegex();
  SplitRegex(SplitRegex&&) noexcept;
  SplitRegex& operator=(SplitRegex&&) noexcept;

  // Every non-overlapping match in well-formed UTF-8 `text`, left to right. An empty match
  // yields nothing and the search goes on one character later.
  std::vector<Match> matches(std::string_view text) const;

 private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
};

}  // namespace spindle

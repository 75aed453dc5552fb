#include "host/text_stream.h"

#include "host/utf8.h"

namespace spindle {

std::string TextStream::push(uint32_t id) {
  const std::string* bytes = tokenizer_.token_bytes(id);
  if (!bytes) return {};
  pending_ += *bytes;
  const size_t ready = complete_utf8_prefix(pending_);
  std::string text = utf8_lossy(std::string_view(pending_).substr(0, ready));
  pending_.erase(0, ready);
  return text;
}

std::string TextStream::finish() {
  std::string text = utf8_lossy(pending_);
  pending_.clear();
  return text;
}

}  // namespace spindle

#include "kiln/engine/incremental_text.h"

#include <span>

namespace kiln::engine {

bool ends_with_incomplete_utf8(const std::string& s) {
  const size_t n = s.size();
  if (n >= 3 && s.compare(n - 3, 3, "\xEF\xBF\xBD") == 0) return true;
  // Walk back over at most 3 continuation bytes to the lead byte.
  size_t i = n;
  int continuation = 0;
  while (i > 0 && continuation < 4) {
    const auto c = static_cast<unsigned char>(s[i - 1]);
    if ((c & 0xC0) != 0x80) break;
    ++continuation;
    --i;
  }
  if (i == 0) return continuation > 0;  // only continuation bytes: wait for more context
  const auto lead = static_cast<unsigned char>(s[i - 1]);
  int need = 0;
  if ((lead & 0x80) == 0)
    need = 0;
  else if ((lead & 0xE0) == 0xC0)
    need = 1;
  else if ((lead & 0xF0) == 0xE0)
    need = 2;
  else if ((lead & 0xF8) == 0xF0)
    need = 3;
  else
    return false;  // invalid lead byte: nothing will complete it, let it through
  return continuation < need;
}

std::string IncrementalText::decode(size_t begin, size_t end) const {
  if (begin >= end) return {};
  return tokenizer_->decode(std::span<const int32_t>(ids_.data() + begin, end - begin),
                            skip_special_);
}

std::string IncrementalText::push(int32_t token) {
  ids_.push_back(token);
  const std::string context = decode(prefix_, read_);
  const std::string window = decode(prefix_, ids_.size());
  if (window.size() <= context.size() || ends_with_incomplete_utf8(window)) return {};
  std::string delta = window.substr(context.size());
  prefix_ = read_;
  read_ = ids_.size();
  return delta;
}

std::string IncrementalText::flush() {
  if (read_ == ids_.size()) return {};
  const std::string context = decode(prefix_, read_);
  const std::string window = decode(prefix_, ids_.size());
  prefix_ = read_ = ids_.size();
  if (window.size() <= context.size()) return {};
  return window.substr(context.size());
}

}  // namespace kiln::engine

// UTF-8 helpers shared by the tokenizers and the incremental decoder.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::model {

// Length of the well-formed UTF-8 sequence at the start of `s` (1..4), or 0 when `s` does not
// start with one (invalid byte, truncated or overlong sequence, surrogate, > U+10FFFF).
size_t utf8_sequence_length(std::string_view s);

// Appends `bytes` to `out` as valid UTF-8: every maximal ill-formed subpart becomes one U+FFFD
// (the Unicode "maximal subpart" practice, the same as Python's errors="replace").
// With final == false, a trailing valid-but-incomplete sequence is left unconsumed so that the
// caller can complete it with more bytes. Returns the number of bytes consumed.
size_t append_valid_utf8(std::string_view bytes, bool final, std::string& out);

// Appends the code point `cp` (at most U+10FFFF) to `out` in UTF-8.
void append_utf8(uint32_t cp, std::string& out);

}  // namespace kiln::model

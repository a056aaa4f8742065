// JSON schema's `format` for strings: each supported format as a pattern in the regex subset
// (regex_subset.h), so that a constrained string is valid by construction. The patterns are
// the strict cores of the formats, which the `jsonschema` package's format checker (with
// rfc3339-validator for date-time and time) accepts: every string they allow passes, not every
// string that passes is allowed (e.g. dates carry real month lengths and leap years; no
// lowercase "t"/"z" in date-time; no IPv4-suffixed IPv6 forms; email is a common dot-atom
// form).
#pragma once
#include <string_view>

namespace kiln::engine {

// The pattern for `format`, or nullptr when kiln does not enforce that format.
const char* string_format_pattern(std::string_view format);
// The supported names, comma-separated (for errors and docs).
const char* supported_string_formats();

}  // namespace kiln::engine

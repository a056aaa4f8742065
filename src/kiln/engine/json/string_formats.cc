#include "kiln/engine/json/string_formats.h"

#include <string>

namespace kiln::engine {

namespace {

// Years 0001-9999 (Python's date rejects year 0), months with their lengths, and 29 February
// only in leap years (divisible by 4, centuries only when divisible by 400).
#define KILN_YEAR "([0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})"
#define KILN_DATE                                                                  \
  "(" KILN_YEAR                                                                    \
  "-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|" \
  "02-(0[1-9]|1[0-9]|2[0-8]))"                                                     \
  "|([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)-02-29)"
#define KILN_TIME                                        \
  "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]+)?" \
  "(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
#define KILN_HEX4 "[0-9a-fA-F]{1,4}"
#define KILN_OCTET "(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
#define KILN_LABEL "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"

struct Format {
  const char* name;
  const char* pattern;
};

const Format kFormats[] = {
    {"date", "^" KILN_DATE "$"},
    {"time", "^" KILN_TIME "$"},
    {"date-time", "^" KILN_DATE "T" KILN_TIME "$"},
    {"uuid", "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"},
    {"email", "^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@" KILN_LABEL
              "(\\." KILN_LABEL ")+$"},
    {"ipv4", "^" KILN_OCTET "(\\." KILN_OCTET "){3}$"},
    // Eight groups, or fewer around one "::" (at most seven written then).
    {"ipv6",
     "^((" KILN_HEX4 ":){7}" KILN_HEX4 "|(" KILN_HEX4 ":){1,7}:|(" KILN_HEX4 ":){1,6}:" KILN_HEX4
     "|(" KILN_HEX4 ":){1,5}(:" KILN_HEX4 "){1,2}|(" KILN_HEX4 ":){1,4}(:" KILN_HEX4
     "){1,3}|(" KILN_HEX4 ":){1,3}(:" KILN_HEX4 "){1,4}|(" KILN_HEX4 ":){1,2}(:" KILN_HEX4
     "){1,5}|" KILN_HEX4 ":(:" KILN_HEX4 "){1,6}|:((:" KILN_HEX4 "){1,7}|:))$"},
};

#undef KILN_YEAR
#undef KILN_DATE
#undef KILN_TIME
#undef KILN_HEX4
#undef KILN_OCTET
#undef KILN_LABEL

}  // namespace

const char* string_format_pattern(std::string_view format) {
  for (const Format& f : kFormats) {
    if (format == f.name) return f.pattern;
  }
  return nullptr;
}

const char* supported_string_formats() {
  static const std::string kNames = [] {
    std::string s;
    for (const Format& f : kFormats) s += (s.empty() ? "" : ", ") + std::string(f.name);
    return s;
  }();
  return kNames.c_str();
}

}  // namespace kiln::engine

// The graph IR's text form. Besides refusing bad text with kiln::Error, the parser and printer
// promise (printer.h) that whatever parses prints to text that parses again and prints the same.
#include "fuzz_support.h"
#include "kiln/graph/parser.h"
#include "kiln/graph/printer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string printed;
  kiln::fuzz::refusing_bad_input(
      [&] { printed = kiln::graph::print(kiln::graph::parse(kiln::fuzz::as_text(data, size))); });
  if (printed.empty()) return 0;
  // Not under refusing_bad_input: printed text that does not parse is a finding.
  if (kiln::graph::print(kiln::graph::parse(printed)) != printed) __builtin_trap();
  return 0;
}

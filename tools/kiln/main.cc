// The kiln command line: run, serve, bench, eval, graph. Each subcommand lives in its own file.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "kiln/base/error.h"

int main(int argc, char** argv) {
  CLI::App app{"kiln: LLM inference and serving with graph-mode decode"};
  app.require_subcommand(1);
  app.set_version_flag("--version", KILN_VERSION);
  try {
    CLI11_PARSE(app, argc, argv);
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln: error: %s\n", e.what());
    return 1;
  }
  return 0;
}

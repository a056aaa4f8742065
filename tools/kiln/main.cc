// The kiln command line: run, chat, serve, bench, eval, graph, logits, perplexity, tokenize, pull.
// Each subcommand lives in its own file and registers itself here; errors surface as one line and a
// non-zero exit.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "commands.h"
#include "kiln/base/error.h"

int main(int argc, char** argv) {
  CLI::App app{"kiln: LLM inference and serving with graph-mode decode"};
  app.require_subcommand(1);
  app.set_version_flag("--version", KILN_VERSION);
  kiln::cli::add_run_command(app);
  kiln::cli::add_chat_command(app);
  kiln::cli::add_graph_command(app);
  CLI::App* bench = kiln::cli::add_bench_command(app);
  kiln::cli::add_bench_serving_command(*bench);
  kiln::cli::add_bench_speculative_command(*bench);
  kiln::cli::add_serve_command(app);
  kiln::cli::add_eval_command(app);
  kiln::cli::add_logits_command(app);
  kiln::cli::add_perplexity_command(app);
  kiln::cli::add_tokenize_command(app);
  kiln::cli::add_pull_command(app);
  kiln::cli::add_grammar_check_command(app);
  kiln::cli::add_embed_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}

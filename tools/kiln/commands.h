// Each `kiln` subcommand registers itself on the CLI app from its own file.
#pragma once
#include <CLI/CLI.hpp>

namespace kiln::cli {

void add_run_command(CLI::App& app);    // run_command.cc
void add_chat_command(CLI::App& app);   // chat_command.cc
void add_serve_command(CLI::App& app);  // serve_command.cc
void add_eval_command(CLI::App& app);   // eval_command.cc (eval gsm8k)
// bench_command.cc: `kiln bench` (offline). Returns the bench command so that the online
// benchmark can hang off it as `kiln bench serving` (add_bench_serving_command).
CLI::App* add_bench_command(CLI::App& app);
void add_bench_serving_command(CLI::App& bench);  // bench_serving_command.cc: `kiln bench serving`
// bench_speculative_command.cc: `kiln bench speculative`
void add_bench_speculative_command(CLI::App& bench);
void add_graph_command(CLI::App& app);          // graph_command.cc
void add_logits_command(CLI::App& app);         // logits_command.cc
void add_perplexity_command(CLI::App& app);     // perplexity_command.cc
void add_tokenize_command(CLI::App& app);       // tokenize_command.cc
void add_pull_command(CLI::App& app);           // pull_command.cc (kiln pull NAME)
void add_grammar_check_command(CLI::App& app);  // grammar_check_command.cc
void add_embed_command(CLI::App& app);          // embed_command.cc

}  // namespace kiln::cli

// `kiln tokenize`: the token ids of a text as one JSON line, from the model's tokenizer alone
// (no weights are loaded). For comparing kiln's tokenizers with other implementations
// (tests/model/test_hf_tokenizer.py compares HF tokenizer.json files with `tokenizers`).
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "default_model.h"
#include "kiln/base/error.h"
#include "kiln/base/log.h"
#include "kiln/engine/runtime.h"
#include "kiln/model/model_files.h"
#include "kiln/model/tokenizer.h"

namespace kiln::cli {
namespace {

struct TokenizeArgs {
  std::string model;
  std::string text;
  std::string text_file;
  bool add_special = false;
  bool no_parse_special = false;
  std::string log_level = "warn";
};

int run_tokenize(const TokenizeArgs& a) {
  set_log_level(a.log_level);
  std::string text = a.text;
  if (!a.text_file.empty()) {
    std::ifstream in(a.text_file, std::ios::binary);
    KILN_CHECK(in.good(), "cannot open text file '{}'", a.text_file);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string path = model_or_default(a.model);
  auto tok = model::Tokenizer::create(model::read_tokenizer(path));
  const std::vector<int32_t> ids = tok->encode(text, a.add_special, !a.no_parse_special);
  std::printf("%s\n", nlohmann::json{{"ids", ids}}.dump().c_str());
  return 0;
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* cmd =
      app.add_subcommand("tokenize", "Print the token ids of a text as JSON ({\"ids\": [...]})");
  add_model_options(cmd, args->model);
  auto* text = cmd->add_option("--text", args->text, "Text to tokenize");
  cmd->add_option("--text-file", args->text_file, "File whose bytes are the text")->excludes(text);
  cmd->add_flag("--add-special", args->add_special, "Add BOS/EOS as the tokenizer asks");
  cmd->add_flag("--no-parse-special", args->no_parse_special,
                "Tokenize control-token text (\"<s>\") as plain text");
  cmd->add_option("--log-level", args->log_level, "trace|debug|info|warn|error|off");
  cmd->callback([args] { std::exit(run_tokenize(*args)); });
}

}  // namespace kiln::cli

// `kiln tokenize`: the token ids of a text as one JSON line, from the model's tokenizer alone
// (no weights are loaded). For comparing kiln's tokenizers with other implementations
// (tests/model/test_hf_tokenizer.py compares HF tokenizer.json files with `tokenizers`;
// tests/model/test_llama_vocab.py runs llama.cpp's vocabulary test set through --split-on).
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string_view>

#include "commands.h"
#include "default_model.h"
#include "kiln/base/error.h"
#include "kiln/base/log.h"
#include "kiln/engine/runtime.h"
#include "kiln/model/model_files.h"
#include "kiln/model/tokenizer.h"
#include "kiln/model/tokenizer_pretypes.h"

namespace kiln::cli {
namespace {

struct TokenizeArgs {
  std::string model;
  std::string text;
  std::string text_file;
  bool add_special = false;
  bool no_parse_special = false;
  std::string split_on;
  bool pre_types = false;
  std::string log_level = "warn";
};

// The pre-tokenizer table as JSON lines (docs and bench/tokenizer_pretypes_vs_llama_cpp.py read
// it): one line per row.
int print_pre_types() {
  for (const model::PreTokenizerType& row : model::pretokenizer_types()) {
    nlohmann::json names = nlohmann::json::array();
    for (std::string_view n : row.names) names.push_back(n);
    nlohmann::json line = {{"type", row.type},
                           {"names", names},
                           {"regexes", row.regexes.size()},
                           {"ignore_merges", row.ignore_merges},
                           {"add_bos", row.add_bos || row.force_add_bos},
                           {"byte_level", row.byte_level},
                           {"refusal", row.refusal}};
    std::printf("%s\n", line.dump().c_str());
  }
  return 0;
}

int run_tokenize(const TokenizeArgs& a) {
  set_log_level(a.log_level);
  if (a.pre_types) return print_pre_types();
  std::string text = a.text;
  if (!a.text_file.empty()) {
    std::ifstream in(a.text_file, std::ios::binary);
    KILN_CHECK(in.good(), "cannot open text file '{}'", a.text_file);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string path = model_or_default(a.model);
  auto tok = model::Tokenizer::create(model::read_tokenizer(path));
  auto print_ids = [&](std::string_view piece) {
    const std::vector<int32_t> ids = tok->encode(piece, a.add_special, !a.no_parse_special);
    std::printf("%s\n", nlohmann::json{{"ids", ids}}.dump().c_str());
  };
  if (a.split_on.empty()) {
    print_ids(text);
    return 0;
  }
  // Batch mode: one line per piece, so that a whole test set costs one vocabulary load. A
  // separator that ends the text ends the last piece (no empty piece after it).
  const std::string_view all = text;
  for (size_t pos = 0; pos < all.size();) {
    const size_t next = all.find(a.split_on, pos);
    if (next == std::string_view::npos) {
      print_ids(all.substr(pos));
      break;
    }
    print_ids(all.substr(pos, next - pos));
    pos = next + a.split_on.size();
  }
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
  cmd->add_option("--split-on", args->split_on,
                  "Tokenize each piece of the text between these separators: one line per piece");
  cmd->add_flag("--pre-types", args->pre_types,
                "Print the BPE pre-tokenizer types kiln knows (JSON lines) and exit");
  cmd->add_flag("--add-special", args->add_special, "Add BOS/EOS as the tokenizer asks");
  cmd->add_flag("--no-parse-special", args->no_parse_special,
                "Tokenize control-token text (\"<s>\") as plain text");
  cmd->add_option("--log-level", args->log_level, "trace|debug|info|warn|error|off");
  cmd->callback([args] { std::exit(run_tokenize(*args)); });
}

}  // namespace kiln::cli

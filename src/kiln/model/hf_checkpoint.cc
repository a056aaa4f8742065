#include "kiln/model/hf_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "kiln/base/error.h"
#include "kiln/model/hf_tokenizer.h"

namespace kiln::model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kLayout =
    "a Hugging Face model directory holds config.json, tokenizer.json and *.safetensors";

json read_json(const fs::path& path) {
  std::ifstream in(path);
  KILN_CHECK(in.good(), "cannot read '{}'", path.string());
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  KILN_CHECK(!j.is_discarded(), "'{}' is not valid JSON", path.string());
  return j;
}

json read_required(const fs::path& dir, const char* name) {
  KILN_CHECK(fs::is_regular_file(dir / name), "'{}' has no {} ({})", dir.string(), name, kLayout);
  return read_json(dir / name);
}

json read_optional(const fs::path& dir, const char* name) {
  return fs::is_regular_file(dir / name) ? read_json(dir / name) : json();
}

}  // namespace

std::vector<std::shared_ptr<SafetensorsFile>> open_hf_weights(
    const std::string& dir_name, const SafetensorsFile::SkipTensor& skip) {
  const fs::path dir(dir_name);
  std::vector<std::shared_ptr<SafetensorsFile>> shards;
  const fs::path index_path = dir / "model.safetensors.index.json";
  if (fs::exists(index_path)) {
    const json index = read_json(index_path);
    KILN_CHECK(index.is_object() && index.contains("weight_map") && index["weight_map"].is_object(),
               "'{}' has no weight_map", index_path.string());
    std::set<std::string> files;
    for (const auto& [tensor, file] : index["weight_map"].items()) {
      KILN_CHECK(file.is_string() &&
                     fs::path(file.get<std::string>()).filename() == file.get<std::string>(),
                 "'{}': tensor '{}' maps to an invalid file name", index_path.string(), tensor);
      files.insert(file.get<std::string>());
    }
    for (const auto& f : files) {
      KILN_CHECK(fs::is_regular_file(dir / f), "'{}' lists shard '{}', which is missing",
                 index_path.string(), f);
      shards.push_back(SafetensorsFile::open((dir / f).string(), skip));
    }
    for (const auto& [tensor, file] : index["weight_map"].items()) {
      // A named copy: clang before 16 refuses a lambda that captures a structured binding.
      const std::string file_name = file.get<std::string>();
      auto it = std::find_if(shards.begin(), shards.end(), [&](const auto& s) {
        return fs::path(s->path()).filename() == file_name;
      });
      KILN_CHECK((skip && skip(tensor)) || (*it)->find(tensor) != nullptr,
                 "'{}' places tensor '{}' in '{}', which lacks it", index_path.string(), tensor,
                 file.get<std::string>());
    }
    return shards;
  }
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".safetensors") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  KILN_CHECK(!files.empty(), "'{}' has no *.safetensors weights ({})", dir.string(), kLayout);
  for (const auto& f : files) shards.push_back(SafetensorsFile::open(f.string(), skip));
  return shards;
}

namespace {

// Checkpoints often have more embedding rows than tokens (Qwen: 151936 rows, 151665 tokens) so
// that the matrices divide evenly. Sampling may pick such a row: like llama.cpp's converter,
// give each a "[PAD<id>]" token of type unused, which decoding drops.
void pad_vocab(TokenizerVocab& v, int64_t rows) {
  const auto n = static_cast<int64_t>(v.tokens.size());
  if (n >= rows) return;
  if (v.token_types.empty()) v.token_types.assign(v.tokens.size(), 1);
  for (int64_t id = n; id < rows; ++id) {
    v.tokens.push_back("[PAD" + std::to_string(id) + "]");
    v.token_types.push_back(static_cast<int32_t>(TokenType::kUnused));
    if (!v.scores.empty()) v.scores.push_back(0.0f);
  }
}

}  // namespace

bool is_hf_checkpoint_dir(const std::string& path) { return fs::is_directory(path); }

TokenizerVocab read_hf_tokenizer(const std::string& dir) {
  const fs::path d(dir);
  const json tok = read_required(d, "tokenizer.json");
  return vocab_from_hf_tokenizer(tok, read_optional(d, "tokenizer_config.json"),
                                 read_optional(d, "generation_config.json"));
}

std::string read_hf_chat_template(const std::string& dir) {
  const fs::path d(dir);
  // transformers 5 writes the template to its own file.
  if (fs::is_regular_file(d / "chat_template.jinja")) {
    std::ifstream in(d / "chat_template.jinja");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  return chat_template_from_hf(read_optional(d, "tokenizer_config.json"));
}

HfCheckpoint open_hf_checkpoint(const std::string& dir, std::optional<DType> quantize) {
  HfCheckpoint c;
  c.dir = dir;
  const fs::path d(dir);
  c.config = model_config_from_hf(read_required(d, "config.json"));
  c.vocab = read_hf_tokenizer(dir);
  pad_vocab(c.vocab, c.config.config.vocab);
  c.chat_template = read_hf_chat_template(dir);
  c.tensors = std::make_shared<HfTensorSource>(c.config, open_hf_weights(dir), quantize);
  return c;
}

}  // namespace kiln::model

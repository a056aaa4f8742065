#include "kiln/model/model_files.h"

#include <filesystem>

#include "kiln/base/error.h"
#include "kiln/model/gguf.h"
#include "kiln/model/hf_checkpoint.h"
#include "kiln/model/mla_tensors.h"
#include "kiln/model/tokenizer_loader.h"

namespace kiln::model {
namespace {

std::string base_name(const std::string& path) {
  std::filesystem::path p(path);
  if (!p.has_filename()) p = p.parent_path();  // "dir/"
  return p.filename().string();
}

}  // namespace

ModelFiles open_model_files(const std::string& path, const std::string& quantize) {
  ModelFiles m;
  m.path = path;
  std::optional<DType> qtype;
  if (!quantize.empty()) {
    qtype = dtype_from_name(quantize);
    KILN_CHECK(qtype == DType::Q8_0 || qtype == DType::Q4_0,
               "--quantize '{}' is not supported (q8_0 or q4_0)", quantize);
    KILN_CHECK(is_hf_checkpoint_dir(path),
               "--quantize applies to Hugging Face directories; '{}' is a GGUF file, whose "
               "weights keep the type they were converted to",
               path);
  }
  if (is_hf_checkpoint_dir(path)) {
    HfCheckpoint hf = open_hf_checkpoint(path, qtype);
    m.format = "hf";
    m.name = base_name(path);
    m.config = hf.config.config;
    m.tensors = with_mla_tensors(hf.tensors, m.config);
    m.vocab = std::move(hf.vocab);
    m.chat_template = std::move(hf.chat_template);
    return m;
  }
  std::shared_ptr<GgufFile> file = GgufFile::open(path);
  m.format = "gguf";
  m.name = file->try_get_string("general.name").value_or(base_name(path));
  m.config = read_model_config(*file);
  m.vocab = read_tokenizer_vocab(*file);
  m.chat_template = file->try_get_string("tokenizer.chat_template").value_or("");
  m.tensors = with_mla_tensors(gguf_tensor_source(file), m.config);
  return m;
}

TokenizerVocab read_tokenizer(const std::string& path) {
  if (is_hf_checkpoint_dir(path)) return read_hf_tokenizer(path);
  return read_tokenizer_vocab(*GgufFile::open(path));
}

std::string read_chat_template(const std::string& path) {
  if (is_hf_checkpoint_dir(path)) return read_hf_chat_template(path);
  return GgufFile::open(path)->try_get_string("tokenizer.chat_template").value_or("");
}

}  // namespace kiln::model

// A Hugging Face model directory: config.json, tokenizer.json, tokenizer_config.json,
// generation_config.json (optional) and the weights as model.safetensors or shards listed by
// model.safetensors.index.json. Opening it reads the JSON files and maps and validates every
// safetensors header; weights are read later, through the tensor source.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/model/hf_config.h"
#include "kiln/model/hf_tensor_source.h"
#include "kiln/model/tokenizer_vocab.h"

namespace kiln::model {

struct HfCheckpoint {
  std::string dir;
  HfModelConfig config;
  std::shared_ptr<const HfTensorSource> tensors;
  TokenizerVocab vocab;
  std::string chat_template;  // tokenizer_config.json's, or chat_template.jinja's
};

// A directory with a config.json: what kiln treats as a Hugging Face checkpoint.
bool is_hf_checkpoint_dir(const std::string& path);

// Throws kiln::Error with one line naming the directory and the problem (a missing file, an
// unsupported architecture or tokenizer, a corrupt safetensors file, ...).
// quantize: see HfTensorSource.
HfCheckpoint open_hf_checkpoint(const std::string& dir,
                                std::optional<DType> quantize = std::nullopt);

// The weight files: the shards model.safetensors.index.json lists, else every *.safetensors in
// the directory (sorted by name). Throws kiln::Error when there are none or an index is wrong.
// `skip`: see SafetensorsFile::open.
std::vector<std::shared_ptr<SafetensorsFile>> open_hf_weights(
    const std::string& dir, const SafetensorsFile::SkipTensor& skip = nullptr);

// Only what the tokenizer and chat template need (no weights are opened).
TokenizerVocab read_hf_tokenizer(const std::string& dir);
std::string read_hf_chat_template(const std::string& dir);

}  // namespace kiln::model

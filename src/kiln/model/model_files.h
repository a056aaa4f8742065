// Opens what `-m PATH` names: a GGUF file or a Hugging Face checkpoint directory
// (hf_checkpoint.h). Everything above the model layer sees only this: the config, the weights
// by GGUF name, the tokenizer's vocabulary and the chat template.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "kiln/model/model_config.h"
#include "kiln/model/tensor_source.h"
#include "kiln/model/tokenizer_vocab.h"

namespace kiln::model {

struct ModelFiles {
  std::string path;
  std::string format;  // "gguf" or "hf"
  std::string name;    // GGUF general.name, else the file or directory name
  ModelConfig config;
  std::shared_ptr<const TensorSource> tensors;
  TokenizerVocab vocab;
  std::string chat_template;  // empty when the model has none
};

// Throws kiln::Error with one line naming the path and the problem. `quantize` ("", "q8_0",
// "q4_0"): quantize a Hugging Face checkpoint's matrices at load (GGUF files are refused: they
// are already stored in the type they were converted to).
ModelFiles open_model_files(const std::string& path, const std::string& quantize = "");

// The tokenizer's vocabulary alone, without opening the weights.
TokenizerVocab read_tokenizer(const std::string& path);

// The chat template alone, without opening the weights (cheap for either format).
std::string read_chat_template(const std::string& path);

}  // namespace kiln::model

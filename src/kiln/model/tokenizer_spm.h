// SentencePiece-style tokenizer (GGUF tokenizer.ggml.model = "llama"). Internal to tokenizer.cc.
#pragma once
#include <memory>

#include "kiln/model/tokenizer.h"

namespace kiln::model {

std::unique_ptr<Tokenizer> make_spm_tokenizer(TokenizerVocab vocab);

}  // namespace kiln::model

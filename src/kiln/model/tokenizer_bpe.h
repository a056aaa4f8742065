// Byte-level BPE tokenizer (GGUF tokenizer.ggml.model = "gpt2"). Internal to tokenizer.cc.
#pragma once
#include <memory>

#include "kiln/model/tokenizer.h"

namespace kiln::model {

std::unique_ptr<Tokenizer> make_bpe_tokenizer(TokenizerVocab vocab);

}  // namespace kiln::model

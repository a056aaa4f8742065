// WordPiece tokenizer (GGUF tokenizer.ggml.model = "bert"). Internal to tokenizer.cc.
#pragma once
#include <memory>

#include "kiln/model/tokenizer.h"

namespace kiln::model {

std::unique_ptr<Tokenizer> make_wpm_tokenizer(TokenizerVocab vocab);

}  // namespace kiln::model

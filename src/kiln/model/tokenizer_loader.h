// Glue between the GGUF reader and the tokenizer: the tokenizer.ggml.* keys of a model file
// as a TokenizerVocab.
#pragma once
#include "kiln/model/tokenizer_vocab.h"

namespace kiln::model {

class GgufFile;

TokenizerVocab read_tokenizer_vocab(const GgufFile& file);

}  // namespace kiln::model

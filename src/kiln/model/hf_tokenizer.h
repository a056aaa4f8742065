// A Hugging Face tokenizer (tokenizer.json in the `tokenizers` format, with tokenizer_config.json
// and generation_config.json) as kiln's TokenizerVocab. Two families are read, the ones the
// supported models use; anything else is refused with one line naming what is unsupported:
//  - byte-level BPE (Llama 3, Qwen 2/3): a ByteLevel pre-tokenizer, alone (GPT-2's regex) or
//    after a Split by Llama 3's or Qwen 2's regex; model "gpt2".
//  - SentencePiece-style BPE (Llama 2, Mistral, Gemma): spaces as U+2581 by a Metaspace
//    pre-tokenizer or a Replace (+ Prepend) normalizer, byte fallback; model "llama", merged
//    by the file's merge ranks.
// Added tokens become control tokens (special) or user-defined ones (always matched).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "kiln/model/tokenizer_vocab.h"

namespace kiln::model {

// tokenizer_config / generation_config may be null JSON (file absent).
TokenizerVocab vocab_from_hf_tokenizer(const nlohmann::json& tokenizer,
                                       const nlohmann::json& tokenizer_config,
                                       const nlohmann::json& generation_config);

// tokenizer_config.json's chat_template: a string, or a list of named templates ("default"
// is taken); empty when there is none.
std::string chat_template_from_hf(const nlohmann::json& tokenizer_config);

}  // namespace kiln::model

// `kiln embed` on a generative model (a GGUF file or a decoder's Hugging Face folder): the
// hidden state after the final norm, pooled over the text's tokens (last token or mean), for
// decoder models trained to embed (e5-mistral, Qwen3-Embedding, ...). Each text runs as one
// eager prefill of its own (the model's own tokenization, BOS as it adds it).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/model/embedding_pooling.h"

namespace kiln::cli {

struct DecoderEmbeddings {
  std::vector<float> vectors;  // [inputs, dim]
  int64_t dim = 0;
};

// inputs: texts, or token ids where ids[i] is non-empty (then used as given).
DecoderEmbeddings embed_with_decoder(const std::string& model_path,
                                     const std::vector<std::string>& texts,
                                     const std::vector<std::vector<int32_t>>& ids,
                                     const model::PoolingSpec& spec, int threads);

}  // namespace kiln::cli

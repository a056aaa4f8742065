// How a sequence's hidden states become one embedding vector: sentence-transformers' Pooling
// module (mean over the tokens, the first token [CLS], the last token, the per-dimension
// maximum) and its Normalize module (unit L2 length).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::model {

enum class Pooling { kMean, kCls, kLast, kMax };

struct PoolingSpec {
  Pooling mode = Pooling::kMean;
  bool normalize = false;
};

// "mean", "cls", "last", "max"; nullopt for anything else.
std::optional<Pooling> pooling_from_name(std::string_view name);
std::string pooling_name(Pooling mode);

// out[dim] from hidden[len, dim] (len >= 1), every token counted (the padding sentence-
// transformers masks out is never in `hidden`: kiln packs sequences instead of padding them).
void pool_hidden(const float* hidden, int64_t len, int64_t dim, const PoolingSpec& spec,
                 float* out);

}  // namespace kiln::model

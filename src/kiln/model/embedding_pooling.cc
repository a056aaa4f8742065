#include "kiln/model/embedding_pooling.h"

#include <algorithm>
#include <cmath>

#include "kiln/base/error.h"

namespace kiln::model {

std::optional<Pooling> pooling_from_name(std::string_view name) {
  if (name == "mean") return Pooling::kMean;
  if (name == "cls") return Pooling::kCls;
  if (name == "last") return Pooling::kLast;
  if (name == "max") return Pooling::kMax;
  return std::nullopt;
}

std::string pooling_name(Pooling mode) {
  switch (mode) {
    case Pooling::kMean:
      return "mean";
    case Pooling::kCls:
      return "cls";
    case Pooling::kLast:
      return "last";
    case Pooling::kMax:
      return "max";
  }
  return "?";
}

void pool_hidden(const float* hidden, int64_t len, int64_t dim, const PoolingSpec& spec,
                 float* out) {
  KILN_CHECK(len >= 1 && dim >= 1, "pooling needs at least one token of at least one dimension");
  switch (spec.mode) {
    case Pooling::kCls:
      std::copy_n(hidden, dim, out);
      break;
    case Pooling::kLast:
      std::copy_n(hidden + (len - 1) * dim, dim, out);
      break;
    case Pooling::kMax:
      std::copy_n(hidden, dim, out);
      for (int64_t t = 1; t < len; ++t)
        for (int64_t d = 0; d < dim; ++d) out[d] = std::max(out[d], hidden[t * dim + d]);
      break;
    case Pooling::kMean: {
      // Summed in double: a 512-token mean stays as exact as its inputs.
      for (int64_t d = 0; d < dim; ++d) {
        double sum = 0.0;
        for (int64_t t = 0; t < len; ++t) sum += hidden[t * dim + d];
        out[d] = static_cast<float>(sum / static_cast<double>(len));
      }
      break;
    }
  }
  if (spec.normalize) {
    double ss = 0.0;
    for (int64_t d = 0; d < dim; ++d) ss += static_cast<double>(out[d]) * out[d];
    // torch.nn.functional.normalize's eps: a zero vector stays zero.
    const double norm = std::max(std::sqrt(ss), 1e-12);
    for (int64_t d = 0; d < dim; ++d) out[d] = static_cast<float>(out[d] / norm);
  }
}

}  // namespace kiln::model

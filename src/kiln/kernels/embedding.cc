#include "kiln/kernels/embedding.h"

#include <algorithm>

#include "kiln/base/error.h"
#include "kiln/kernels/dequant.h"

namespace kiln::kernels {

void embedding(DType table_dtype, const void* table, int64_t vocab, int64_t dim, const int32_t* ids,
               int64_t T, float* out, const ExecContext& ctx) {
  KILN_CHECK(vocab >= 0 && dim > 0 && T >= 0, "embedding: bad shape vocab={} dim={} T={}", vocab,
             dim, T);
  KILN_CHECK(T == 0 || (ids != nullptr && out != nullptr && table != nullptr),
             "embedding: null pointer");
  const size_t row_bytes = dtype_bytes(table_dtype, dim);  // throws unless dim is whole blocks
  const auto* base = static_cast<const uint8_t*>(table);
  Range r = split_range(T, ctx.tid, ctx.nth);
  for (int64_t t = r.begin; t < r.end; ++t) {
    int64_t id = ids[t];
    float* dst = out + t * dim;
    if (id < 0 || id >= vocab) {
      std::fill(dst, dst + dim, 0.0f);
      continue;
    }
    dequantize_row(table_dtype, base + static_cast<size_t>(id) * row_bytes, dst, dim);
  }
}

}  // namespace kiln::kernels

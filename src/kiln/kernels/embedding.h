// Token embedding lookup: out[t, :] = dequantized row ids[t] of a [vocab, dim] table stored in
// any dtype with storage (the GGUF table itself, not a PackedWeight: rows are read one at a
// time, so the file's layout is already the right one).
#pragma once
#include <cstdint>

#include "kiln/base/dtype.h"
#include "kiln/kernels/exec_context.h"

namespace kiln::kernels {

// Tokens are split across the group's threads. The caller validates ids; an id outside
// [0, vocab) still never reads outside the table: its row is written as zeros.
void embedding(DType table_dtype, const void* table, int64_t vocab, int64_t dim, const int32_t* ids,
               int64_t T, float* out, const ExecContext& ctx);

}  // namespace kiln::kernels

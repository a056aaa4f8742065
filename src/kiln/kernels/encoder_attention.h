// Bidirectional attention of one head over one sequence (the encoders: BERT), every query row
// attending to every key row of its own sequence, no mask, no cache: softmax(q k^T * scale) v.
// Rows of q, k and v are `stride` floats apart (they are slices of one fused QKV matrix); the
// output rows are `out_stride` apart.
//
// The keys are first transposed into a [head_dim, len] block, so the scores of a few queries
// are vector multiply-adds along the keys with no reduction per score, and the softmax's
// exponentials are vector ones. Tiers agree to float rounding (the scalar reference keeps the
// same order but a scalar exp), not bit for bit; within a tier, a row's output does not depend
// on the other rows or sequences of the batch.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kiln::kernels {

// Floats of workspace one call needs (one per thread) for sequences of up to max_len rows.
size_t encoder_attention_workspace_floats(int64_t max_len, int64_t head_dim);

void encoder_attention(const float* q, const float* k, const float* v, int64_t stride, int64_t len,
                       int64_t head_dim, float scale, float* out, int64_t out_stride,
                       float* workspace);

}  // namespace kiln::kernels

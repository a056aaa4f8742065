// Internal: one ISA's encoder attention (encoder_attention.h) and the workspace layout all
// tiers share.
#pragma once
#include <cstdint>

namespace kiln::kernels::detail {

// Queries scored together: each loaded key vector feeds this many multiply-adds.
inline constexpr int kEncoderQueryBlock = 4;
// Keys padded to a multiple of 16 floats (the widest vector), with zero keys.
inline int64_t encoder_padded_len(int64_t len) { return (len + 15) / 16 * 16; }

// Workspace: the transposed keys [head_dim][padded len], then kEncoderQueryBlock score rows of
// padded len.
using EncoderAttentionFn = void (*)(const float* q, const float* k, const float* v, int64_t stride,
                                    int64_t len, int64_t head_dim, float scale, float* out,
                                    int64_t out_stride, float* workspace);

extern const EncoderAttentionFn kEncoderAttentionScalar;
extern const EncoderAttentionFn kEncoderAttentionAvx2;
extern const EncoderAttentionFn kEncoderAttentionAvx512;

}  // namespace kiln::kernels::detail

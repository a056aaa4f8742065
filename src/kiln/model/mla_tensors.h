// Multi-head latent attention (DeepSeek V2/V3) run as ordinary multi-head attention over
// decompressed keys and values, with weights rearranged at load so that the forward pass needs
// only matmuls, RoPE, additions and the paged attention every architecture uses:
//
//   head layout  every head is head_dim = n_rot + qk_nope_dim wide, its rotary part FIRST (RoPE
//                rotates a head's first n_rot dimensions); the dot product q.k does not depend
//                on the order, as long as Q and K share it.
//   Q            attn_q_mla: attn_q_b's (or attn_q's) rows reordered to that layout.
//   latent       attn_kv_c: the first kv_lora_rank rows of attn_kv_a_mqa (normed by
//                attn_kv_a_norm in the graph).
//   K            RoPE(x attn_k_pe_mla^T) + latent attn_k_nope_mla^T: the first holds, in every
//                head's rotary slots, the rotary rows of attn_kv_a_mqa (the key shared by the
//                heads) and zeros elsewhere; the second the heads' key rows of the
//                decompression and zeros in the rotary slots.
//   V            latent attn_v_mla^T: the heads' value rows of the decompression, each head
//                padded with zero rows to head_dim (the KV cache holds K and V of one width).
//   output       attn_output_mla: attn_output with zero columns where V was padded.
//
// Row rearrangements keep the stored type (a row of any GGUF type is whole blocks); the two
// that need a transpose or new columns (attn_k_b of files made for llama.cpp's absorbed MLA,
// and the output) are served as F32, exactly the stored values.
//
// This is the decompressed form: exact, but the cache holds n_heads * head_dim * 2 values per
// token and layer where the absorbed form (attending in the latent space: queries multiplied
// by the heads' key decompressions, the cache holding only the latent and the rotary key, the
// output decompressed after attention) holds kv_lora_rank + n_rot. The absorbed form needs
// per-head batched matmuls and a cache whose V is a prefix of K, which kiln's graph does not
// have yet; it is the next step (docs/models.md).
#pragma once
#include <memory>

#include "kiln/model/model_config.h"
#include "kiln/model/tensor_source.h"

namespace kiln::model {

// Names of the rearranged weights of layer `il` (what the forward pass asks for).
std::string mla_weight_name(int il, const char* what);

// `source` with the rearranged weights added (and, when config.computed_rope_factors is set and
// the source has no kRopeFreqsTensor, that tensor); `source` itself when there is neither.
std::shared_ptr<const TensorSource> with_mla_tensors(std::shared_ptr<const TensorSource> source,
                                                     const ModelConfig& config);

}  // namespace kiln::model

// The sizes and constants a lowered step's kernel reads at run time: one small struct per
// kernel family, with fields named for what they are, held in a Step as a tagged union.
//
// Why a tagged union and not std::variant: a Step is plain data copied into a flat array and
// replayed thousands of times a second. Both keep it trivially copyable and the same size, but
// std::get checks the index on every access (a branch and a throw path per step) and std::visit
// dispatches through a table, while the step's run function already says which family it
// reads. So the pairing is fixed at compile time instead (lowering_internal.h's set_kernel
// stores the struct that the kernel function's own signature names, and run_with_args reads
// that same type back), and the tag serves diagnostics and tests (kind(), holds()).
// Nothing here is written to disk: the compile cache stores graphs and memory plans, and
// steps are lowered again from them at every start.
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kiln/base/dtype.h"

namespace kiln::graph {

// The most outputs one matmul_split writes (Step::out has room for them).
inline constexpr int kMaxSplitOutputs = 4;

// The argument structs are aggregates without default member initializers, so that a union of
// them is trivial; lowering fills them with designated initializers, which zero what it omits.

// Kernels whose every parameter lives in their state object (attention's params and work list).
struct NoArgs {};

// add / mul of a[rows, cols] and b: b is a[rows, cols] too, or one row b[cols] applied to every
// row of a (row_broadcast: a bias).
struct BinaryArgs {
  int64_t rows;
  int64_t cols;
  bool row_broadcast;
};

// Flat elementwise kernels (mul, gelu, gelu_erf, silu, gelu_mul, silu_mul) over `count` floats.
struct ElementwiseArgs {
  int64_t count;
};

struct ScaleArgs {
  int64_t count;
  float factor;
};

struct SoftcapArgs {
  int64_t count;
  float cap;
};

// rms_norm, add_rms_norm and layer_norm over rows of cols floats.
struct NormArgs {
  int64_t rows;
  int64_t cols;
  float eps;
};

// argmax over each row of a [rows, cols] matrix.
struct ArgmaxArgs {
  int64_t rows;
  int64_t cols;
};

// A byte copy (copy op).
struct CopyArgs {
  size_t bytes;
};

// Rotary embedding of `rows` rows of n_heads heads of head_dim floats: the first n_rot
// dimensions of each head rotate; neox picks the pair layout (kernels/rope.h, RopeSpec).
struct RopeArgs {
  int64_t rows;
  int32_t n_heads;
  int32_t head_dim;
  int32_t n_rot;
  bool neox;
};

// Rows `tokens` ids of a [vocab, dim] table stored as table_dtype, dequantized to f32.
struct EmbeddingArgs {
  int64_t vocab;
  int64_t dim;
  int64_t tokens;
  DType table_dtype;
};

// matmul / matmul_add / moe_ffn over `rows` activation rows (the weights are the step's state).
struct MatmulArgs {
  int64_t rows;
};

// A merged GEMM whose n_outputs column blocks go to separate outputs (QKV, gate/up).
struct MatmulSplitArgs {
  int64_t rows;
  int32_t n_outputs;
  int64_t cols[kMaxSplitOutputs];  // columns of each output, in output order
};

// rms_norm into scratch (its first normed_bytes), then the LM head's argmax per row.
struct NormMatmulArgmaxArgs {
  int64_t rows;
  int64_t cols;
  float eps;
  size_t normed_bytes;  // 64-byte aligned; the matmul's scratch follows
};

// out[i] = src[rows_index[i]] for `rows` rows of row_bytes bytes; an index outside
// [0, src_rows) gives a zero row (an inert padded row).
struct TakeRowsArgs {
  int64_t rows;
  size_t row_bytes;
  int64_t src_rows;
};

// kv_write of `tokens` rows (the layer's view of the pool is the step's state).
struct KvWriteArgs {
  int64_t tokens;
};

// qk-norm of q and k (eps), RoPE (the geometry as in RopeArgs), then the KV write.
struct QkNormRopeKvWriteArgs {
  int64_t tokens;
  int32_t n_heads;
  int32_t head_dim;
  int32_t n_rot;
  bool neox;
  float eps;
};

// all_reduce (sum) of `count` floats across the tensor-parallel group.
struct AllReduceArgs {
  int64_t count;
};

// all_gather_vocab / all_argmax: this rank holds cols of the vocab columns of `rows` rows;
// widest_slice is the widest rank's share (every rank sends that many, padded).
struct VocabShardArgs {
  int64_t rows;
  int64_t cols;
  int64_t vocab;
  int64_t widest_slice;
};

// Every argument struct with the union member that holds it.
#define KILN_STEP_ARGS(X)                         \
  X(NoArgs, none)                                 \
  X(BinaryArgs, binary)                           \
  X(ElementwiseArgs, elementwise)                 \
  X(ScaleArgs, scale)                             \
  X(SoftcapArgs, softcap)                         \
  X(NormArgs, norm)                               \
  X(ArgmaxArgs, argmax)                           \
  X(CopyArgs, copy)                               \
  X(RopeArgs, rope)                               \
  X(EmbeddingArgs, embedding)                     \
  X(MatmulArgs, matmul)                           \
  X(MatmulSplitArgs, matmul_split)                \
  X(NormMatmulArgmaxArgs, norm_matmul_argmax)     \
  X(TakeRowsArgs, take_rows)                      \
  X(KvWriteArgs, kv_write)                        \
  X(QkNormRopeKvWriteArgs, qk_norm_rope_kv_write) \
  X(AllReduceArgs, all_reduce)                    \
  X(VocabShardArgs, vocab_shard)

class StepArgs {
 public:
  enum class Kind : uint8_t {
#define KILN_STEP_ARGS_KIND(type, member) member,
    KILN_STEP_ARGS(KILN_STEP_ARGS_KIND)
#undef KILN_STEP_ARGS_KIND
  };

 private:
  union Storage {
#define KILN_STEP_ARGS_FIELD(type, name) type name;
    KILN_STEP_ARGS(KILN_STEP_ARGS_FIELD)
#undef KILN_STEP_ARGS_FIELD
  };

  // The union member holding an A (null: A is not an argument struct). A constant, so access
  // through it compiles to a fixed offset.
  template <typename A>
  static constexpr A Storage::*field() {
#define KILN_STEP_ARGS_FIELD_OF(type, name) \
  if constexpr (std::is_same_v<A, type>) return &Storage::name;
    KILN_STEP_ARGS(KILN_STEP_ARGS_FIELD_OF)
#undef KILN_STEP_ARGS_FIELD_OF
    return nullptr;
  }
  template <typename A>
  static constexpr bool kIsArgs = field<A>() != nullptr;

 public:
  template <typename A>
  void set(const A& args) {
    kind_ = kind_of<A>();
    u_.*field<A>() = args;
  }
  // Unchecked (see the top of the file): the caller knows the family from the run function.
  template <typename A>
  const A& get() const {
    static_assert(kIsArgs<A>, "not a step argument struct (step_args.h, KILN_STEP_ARGS)");
    return u_.*field<A>();
  }
  template <typename A>
  bool holds() const {
    return kind_ == kind_of<A>();
  }
  Kind kind() const { return kind_; }

  template <typename A>
  static constexpr Kind kind_of() {
    static_assert(kIsArgs<A>, "not a step argument struct (step_args.h, KILN_STEP_ARGS)");
#define KILN_STEP_ARGS_KIND_OF(type, member) \
  if constexpr (std::is_same_v<A, type>) return Kind::member;
    KILN_STEP_ARGS(KILN_STEP_ARGS_KIND_OF)
#undef KILN_STEP_ARGS_KIND_OF
    return Kind::none;
  }

 private:
  Storage u_{};
  Kind kind_ = Kind::none;
};

static_assert(std::is_trivially_copyable_v<StepArgs>);

}  // namespace kiln::graph

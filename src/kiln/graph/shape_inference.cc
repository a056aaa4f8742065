// Output types of every op in the table. The rules are the op table's comments made checkable;
// an error names the op and what is wrong with which input.
#include <fmt/format.h>

#include <cmath>

#include "kiln/base/error.h"
#include "kiln/graph/ir.h"

namespace kiln::graph {
namespace {

std::string type_text(const ValueType& t) {
  return fmt::format("{}{}", dtype_name(t.dtype), t.shape.str());
}

class Checker {
 public:
  Checker(Op op, const std::vector<ValueType>& in, const Attrs& attrs)
      : op_(op), in_(in), attrs_(attrs) {}

  template <typename... Args>
  [[noreturn]] void error(fmt::format_string<Args...> format, Args&&... args) const {
    fail("{}: {}", op_name(op_), fmt::format(format, std::forward<Args>(args)...));
  }

  const ValueType& in(int i) const { return in_[i]; }
  int num_inputs() const { return static_cast<int>(in_.size()); }
  const Attrs& attrs() const { return attrs_; }

  void dtype(int i, const char* what, DType want) const {
    if (in_[i].dtype != want) {
      error("{} (input {}) must be {}, got {}", what, i, dtype_name(want), type_text(in_[i]));
    }
  }
  void rank(int i, const char* what, int want) const {
    if (in_[i].shape.rank() != want) {
      error("{} (input {}) must have rank {}, got {}", what, i, want, type_text(in_[i]));
    }
  }
  // A plain (unquantized, non-token) tensor of rank >= 1.
  void dense_rank_at_least_1(int i, const char* what) const {
    if (in_[i].dtype == DType::Token) error("{} (input {}) is an effect token", what, i);
    if (in_[i].shape.rank() < 1)
      error("{} (input {}) must have rank >= 1, got {}", what, i, type_text(in_[i]));
  }
  // An i32 vector of `len` entries (len < 0: any length).
  void index_vector(int i, const char* what, int64_t len) const {
    dtype(i, what, DType::I32);
    rank(i, what, 1);
    if (len >= 0 && in_[i].shape[0] != len) {
      error("{} (input {}) must have {} entries, got {}", what, i, len, type_text(in_[i]));
    }
  }
  // A weight [N,K] multiplied by x[T,K]: any storage dtype, K a whole number of blocks.
  void weight(int i, int64_t k) const {
    const ValueType& w = in_[i];
    if (w.dtype == DType::Token || w.dtype == DType::I32 || w.dtype == DType::I8) {
      error("weight (input {}) has dtype {}, expected a float or quantized type", i,
            dtype_name(w.dtype));
    }
    rank(i, "weight", 2);
    if (w.shape[1] != k)
      error("weight (input {}) {} has K={}, x has K={}", i, type_text(w), w.shape[1], k);
    const int block = dtype_info(w.dtype).block_size;
    if (k % block != 0)
      error("K={} is not a multiple of the {} block size {}", k, dtype_name(w.dtype), block);
  }
  void effect(int i, const char* what) const {
    if (in_[i].dtype != DType::Token)
      error("{} (input {}) must be an effect token, got {}", what, i, type_text(in_[i]));
  }
  // Mutations take the state itself (first in the chain) or the previous mutation's token.
  void state_or_effect(int i) const {
    if (in_[i].dtype != DType::Token && in_[i].shape.rank() == 0) {
      error("kv (input {}) must be the state or an effect token, got {}", i, type_text(in_[i]));
    }
  }
  int64_t positive_int(const char* key) const {
    const int64_t v = int_attr(key);
    if (v <= 0) error("attribute {}={} must be positive", key, v);
    return v;
  }
  bool has_attr(const char* key) const { return attrs_.has(key); }
  int64_t int_attr(const char* key) const {
    try {
      return attrs_.get_int(key);
    } catch (const Error& e) {
      error("{}", e.what());
    }
  }
  double float_attr(const char* key) const {
    try {
      return attrs_.get_float(key);
    } catch (const Error& e) {
      error("{}", e.what());
    }
  }
  const std::vector<int64_t>& ints_attr(const char* key) const {
    try {
      return attrs_.get_ints(key);
    } catch (const Error& e) {
      error("{}", e.what());
    }
  }
  const std::string& str_attr(const char* key) const {
    try {
      return attrs_.get_str(key);
    } catch (const Error& e) {
      error("{}", e.what());
    }
  }

 private:
  Op op_;
  const std::vector<ValueType>& in_;
  const Attrs& attrs_;
};

ValueType f32(Shape shape) { return ValueType{DType::F32, shape}; }
ValueType i32(Shape shape) { return ValueType{DType::I32, shape}; }
ValueType token() { return ValueType{DType::Token, Shape{}}; }

// An activation: f32 of rank >= 1.
void activation(const Checker& c, int i, const char* what) {
  c.dtype(i, what, DType::F32);
  c.dense_rank_at_least_1(i, what);
}

// b equals a's shape, or is [cols] broadcast over a's rows (a bias).
void same_or_row_broadcast(const Checker& c) {
  activation(c, 0, "a");
  activation(c, 1, "b");
  const Shape& a = c.in(0).shape;
  const Shape& b = c.in(1).shape;
  if (a == b) return;
  if (b.rank() == 1 && b[0] == a.cols()) return;
  c.error("b {} must equal a {} or be [{}] (one row broadcast over a's rows)", b.str(), a.str(),
          a.cols());
}

void same_shape(const Checker& c, int i, int j, const char* a, const char* b) {
  if (c.in(i).shape != c.in(j).shape) {
    c.error("{} {} and {} {} must have the same shape", a, type_text(c.in(i)), b,
            type_text(c.in(j)));
  }
}

// x[..., D] normalized with w f32[D].
void norm_weight(const Checker& c, int x, int w) {
  activation(c, w, "norm weight");
  c.rank(w, "norm weight", 1);
  if (c.in(w).shape[0] != c.in(x).shape.cols()) {
    c.error("norm weight {} does not match the last dimension of {}", type_text(c.in(w)),
            type_text(c.in(x)));
  }
  if (c.float_attr("eps") < 0) c.error("eps must be >= 0");
}

// rows x (heads * head_dim) activations, as rope and attention see q and k.
int64_t heads_of(const Checker& c, int i, const char* what, int64_t head_dim) {
  activation(c, i, what);
  c.rank(i, what, 2);
  const int64_t cols = c.in(i).shape[1];
  if (cols % head_dim != 0)
    c.error("{} has {} columns, not a multiple of head_dim {}", what, cols, head_dim);
  return cols / head_dim;
}

// The rope attributes (shared by rope and qk_norm_rope_kv_write) and the optional
// freq_factors input at index `factors`, when there is one. Returns head_dim.
int64_t rope_attrs(const Checker& c, const std::vector<ValueType>& in, size_t factors) {
  const int64_t hd = c.positive_int("head_dim");
  if (hd % 2 != 0) c.error("head_dim {} must be even", hd);
  if (c.float_attr("freq_base") <= 0) c.error("freq_base must be positive");
  const int64_t neox = c.int_attr("neox");
  if (neox != 0 && neox != 1) c.error("neox must be 0 or 1, got {}", neox);
  int64_t n_rot = hd;
  if (c.has_attr("n_rot")) {
    n_rot = c.int_attr("n_rot");
    if (n_rot <= 0 || n_rot % 2 != 0 || n_rot > hd)
      c.error("n_rot {} must be even and in [2, head_dim {}]", n_rot, hd);
  }
  if (in.size() > factors) {
    const int i = static_cast<int>(factors);
    c.dtype(i, "freq_factors", DType::F32);
    c.rank(i, "freq_factors", 1);
    if (in[factors].shape[0] != n_rot / 2)
      c.error("freq_factors (input {}) {} must have n_rot/2 = {} entries", i,
              type_text(in[factors]), n_rot / 2);
  }
  return hd;
}

// Element counts of shape [s0,...] given as an attribute.
Shape shape_attr(const Checker& c, const char* key) {
  const auto& dims = c.ints_attr(key);
  if (dims.size() > static_cast<size_t>(Shape::kMaxRank))
    c.error("{} has rank {} > {}", key, dims.size(), Shape::kMaxRank);
  Shape s;
  for (int64_t d : dims) {
    if (d < 0) c.error("{} has a negative dimension {}", key, d);
    s.push_back(d);
  }
  return s;
}

// An expert weight [E, N, K] (input i) of the mixture-of-experts FFN: any weight dtype, K a
// whole number of its blocks.
void expert_weight(const Checker& c, int i, const char* what, int64_t e, int64_t n, int64_t k) {
  const ValueType& w = c.in(i);
  if (w.dtype == DType::Token || w.dtype == DType::I32 || w.dtype == DType::I8)
    c.error("{} (input {}) has dtype {}, expected a float or quantized type", what, i,
            dtype_name(w.dtype));
  c.rank(i, what, 3);
  if (w.shape != Shape{e, n, k})
    c.error("{} (input {}) {} must be [{},{},{}]", what, i, type_text(w), e, n, k);
  const int block = dtype_info(w.dtype).block_size;
  if (k % block != 0)
    c.error("{}: K={} is not a multiple of the {} block size {}", what, k, dtype_name(w.dtype),
            block);
}

// (h [T,D], router [E,D], gate_exps [E,F,D], up_exps [E,F,D], down_exps [E,D,F]) -> f32[T,D].
ValueType moe_ffn_type(const Checker& c) {
  activation(c, 0, "h");
  c.rank(0, "h", 2);
  const int64_t d = c.in(0).shape[1];
  c.weight(1, d);
  const int64_t e = c.in(1).shape[0];
  if (c.int_attr("n_experts") != e)
    c.error("n_experts={} but the router has {} rows", c.int_attr("n_experts"), e);
  const int64_t k = c.positive_int("top_k");
  if (k > e) c.error("top_k={} exceeds n_experts={}", k, e);
  const int64_t norm = c.int_attr("norm_topk_prob");
  if (norm != 0 && norm != 1) c.error("norm_topk_prob must be 0 or 1, got {}", norm);
  const Attrs& a = c.attrs();
  const int64_t groups = a.get_int("n_groups", 1), topk_groups = a.get_int("topk_groups", 1);
  if (groups < 1 || e % groups != 0 || topk_groups < 1 || topk_groups > groups ||
      k > topk_groups * (e / groups))
    c.error("top_k={} from topk_groups={} of n_groups={} groups of {} experts", k, topk_groups,
            groups, e);
  c.rank(2, "gate_exps", 3);
  const int64_t f = c.in(2).shape[1];
  if (f <= 0) c.error("gate_exps {} has no rows", type_text(c.in(2)));
  auto f32_input = [&](int i, const char* what, const Shape& want) {
    const ValueType& t = c.in(i);
    if (t.dtype != DType::F32 || t.shape != want)
      c.error("{} (input {}) must be f32{}, got {}", what, i, want.str(), type_text(t));
  };
  if (a.get_int("expert_biases", 0) != 0) {
    if (c.num_inputs() != 9) c.error("expert_biases: takes 9 inputs, got {}", c.num_inputs());
    f32_input(5, "router_bias", Shape{e});
    f32_input(6, "gate_bias", Shape{e, f});
    f32_input(7, "up_bias", Shape{e, f});
    f32_input(8, "down_bias", Shape{e, d});
  } else if (c.num_inputs() > 6) {
    c.error("takes 5 or 6 inputs without expert_biases, got {}", c.num_inputs());
  } else if (c.num_inputs() == 6) {
    f32_input(5, "score_bias", Shape{e});
  }
  if (a.get_int("softmax_topk", 0) != 0 && a.get_int("sigmoid", 0) != 0)
    c.error("softmax_topk and sigmoid gating exclude each other");
  if (a.has("swiglu_limit") && !(a.get_float("swiglu_limit") > 0 && a.has("swiglu_alpha")))
    c.error("swiglu_limit must be positive and come with swiglu_alpha");
  expert_weight(c, 2, "gate_exps", e, f, d);
  expert_weight(c, 3, "up_exps", e, f, d);
  expert_weight(c, 4, "down_exps", e, d, f);
  return f32(c.in(0).shape);
}

std::vector<ValueType> infer(const Checker& c, Op op, const std::vector<ValueType>& in) {
  switch (op) {
    case Op::Input:
    case Op::Param:
    case Op::State:
      c.error("a source's type is declared, not inferred");

    case Op::Embedding: {
      const ValueType& table = in[0];
      if (table.dtype == DType::Token || table.dtype == DType::I32)
        c.error("table has dtype {}", dtype_name(table.dtype));
      c.rank(0, "table", 2);
      c.index_vector(1, "ids", -1);
      return {f32({in[1].shape[0], table.shape[1]})};
    }
    case Op::Matmul: {
      activation(c, 0, "x");
      c.rank(0, "x", 2);
      c.weight(1, in[0].shape[1]);
      return {f32({in[0].shape[0], in[1].shape[0]})};
    }
    case Op::MoeFfn:
      return {moe_ffn_type(c)};
    case Op::Add:
    case Op::Mul:
      same_or_row_broadcast(c);
      return {in[0]};
    case Op::Scale:
      activation(c, 0, "x");
      c.float_attr("factor");
      return {in[0]};
    case Op::Gelu:
    case Op::GeluErf:
    case Op::Silu:
      activation(c, 0, "x");
      return {in[0]};
    case Op::Softcap:
      activation(c, 0, "x");
      if (c.float_attr("cap") <= 0) c.error("cap must be positive");
      return {in[0]};
    case Op::RmsNorm:
      activation(c, 0, "x");
      norm_weight(c, 0, 1);
      return {in[0]};
    case Op::LayerNorm:
      activation(c, 0, "x");
      norm_weight(c, 0, 1);
      if (in.size() > 2) norm_weight(c, 0, 2);  // the bias: one value per column, like w
      return {in[0]};
    case Op::Rope: {
      heads_of(c, 0, "x", rope_attrs(c, in, 2));
      c.index_vector(1, "positions", in[0].shape[0]);
      return {in[0]};
    }
    case Op::Reshape: {
      if (in[0].dtype == DType::Token) c.error("cannot reshape an effect token");
      const Shape to = shape_attr(c, "shape");
      if (to.numel() != in[0].shape.numel()) {
        c.error("{} has {} elements, shape {} has {}", type_text(in[0]), in[0].shape.numel(),
                to.str(), to.numel());
      }
      const int block = dtype_info(in[0].dtype).block_size;
      if (to.cols() % block != 0)
        c.error("rows of {} would not be whole {} blocks", to.str(), dtype_name(in[0].dtype));
      return {ValueType{in[0].dtype, to}};
    }
    case Op::Copy:
      if (in[0].dtype == DType::Token) c.error("cannot copy an effect token");
      return {in[0]};
    case Op::Cast: {
      const std::string& name = c.str_attr("dtype");
      const auto to = dtype_from_name(name);
      if (!to) c.error("unknown dtype '{}'", name);
      auto castable = [](DType t) {
        return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::I32;
      };
      if (!castable(in[0].dtype) || !castable(*to)) {
        c.error("cast from {} to {} is not supported (f32, f16, bf16, i32 only)",
                dtype_name(in[0].dtype), name);
      }
      return {ValueType{*to, in[0].shape}};
    }
    case Op::TakeRows: {
      if (in[0].dtype == DType::Token) c.error("x is an effect token");
      c.rank(0, "x", 2);
      c.index_vector(1, "rows", -1);
      return {ValueType{in[0].dtype, Shape{in[1].shape[0], in[0].shape[1]}}};
    }
    case Op::KvWrite: {
      c.state_or_effect(0);
      activation(c, 1, "k");
      c.rank(1, "k", 2);
      activation(c, 2, "v");
      same_shape(c, 1, 2, "k", "v");
      c.index_vector(3, "slots", in[1].shape[0]);
      if (c.int_attr("layer") < 0) c.error("layer must be >= 0");
      return {token()};
    }
    case Op::Attention: {
      const int64_t hd = c.positive_int("head_dim");
      const int64_t heads = c.positive_int("n_heads");
      const int64_t kv_heads = c.positive_int("n_kv_heads");
      if (heads % kv_heads != 0)
        c.error("n_heads {} is not a multiple of n_kv_heads {}", heads, kv_heads);
      if (c.int_attr("layer") < 0) c.error("layer must be >= 0");
      if (c.int_attr("window") < 0) c.error("window must be >= 0");
      c.float_attr("scale");
      // Optional (absent = no cap); when present it must be a usable cap.
      if (c.has_attr("softcap")) {
        const double cap = c.float_attr("softcap");
        if (!(cap > 0 && std::isfinite(cap))) c.error("softcap must be positive, got {}", cap);
      }
      if (heads_of(c, 0, "q", hd) != heads)
        c.error("q {} is not n_heads {} x head_dim {}", type_text(in[0]), heads, hd);
      c.effect(1, "kv");
      c.dtype(2, "block_table", DType::I32);
      c.rank(2, "block_table", 2);
      c.index_vector(3, "seq_lens", in[2].shape[0]);
      c.index_vector(4, "positions", in[0].shape[0]);
      c.index_vector(5, "token_seq", in[0].shape[0]);
      if (c.num_inputs() > 6 && (in[6].dtype != DType::F32 || in[6].shape != Shape{heads}))
        c.error("sinks must be f32[{}], got {}", heads, type_text(in[6]));
      return {in[0]};
    }
    case Op::Argmax:
      activation(c, 0, "x");
      c.rank(0, "x", 2);
      return {i32({in[0].shape[0]})};
    case Op::AllReduce:
      activation(c, 0, "x");
      return {in[0]};
    case Op::AllGatherVocab:
    case Op::AllArgmax: {
      activation(c, 0, "logits");
      c.rank(0, "logits", 2);
      const int64_t vocab = c.positive_int("vocab");
      // The slice's width depends on the rank, which the graph does not know; it is at most
      // the whole vocabulary.
      if (in[0].shape[1] > vocab)
        c.error("logits slice {} is wider than the vocabulary {}", type_text(in[0]), vocab);
      if (op == Op::AllArgmax) return {i32({in[0].shape[0]})};
      return {f32({in[0].shape[0], vocab})};
    }

    case Op::AddRmsNorm:
      activation(c, 0, "a");
      activation(c, 1, "b");
      same_shape(c, 0, 1, "a", "b");
      norm_weight(c, 0, 2);
      return {in[0], in[0]};
    case Op::GeluMul:
    case Op::SiluMul:
      activation(c, 0, "gate");
      activation(c, 1, "up");
      same_shape(c, 0, 1, "gate", "up");
      return {in[0]};
    case Op::MatmulSplit: {
      activation(c, 0, "x");
      c.rank(0, "x", 2);
      c.weight(1, in[0].shape[1]);
      const auto& splits = c.ints_attr("splits");
      if (splits.empty()) c.error("splits is empty");
      int64_t total = 0;
      std::vector<ValueType> out;
      for (int64_t n : splits) {
        if (n <= 0) c.error("split {} must be positive", n);
        total += n;
        out.push_back(f32({in[0].shape[0], n}));
      }
      if (total != in[1].shape[0])
        c.error("splits sum to {}, weight has {} rows", total, in[1].shape[0]);
      return out;
    }
    case Op::MatmulAdd: {
      activation(c, 0, "x");
      c.rank(0, "x", 2);
      c.weight(1, in[0].shape[1]);
      activation(c, 2, "residual");
      const Shape out{in[0].shape[0], in[1].shape[0]};
      if (in[2].shape != out) c.error("residual {} must be {}", type_text(in[2]), out.str());
      return {f32(out)};
    }
    case Op::QkNormRopeKvWrite: {
      const int64_t hd = rope_attrs(c, in, 8);
      const int64_t heads = c.positive_int("n_heads");
      const int64_t kv_heads = c.positive_int("n_kv_heads");
      if (c.int_attr("layer") < 0) c.error("layer must be >= 0");
      if (heads_of(c, 0, "q", hd) != heads)
        c.error("q {} is not n_heads {} x head_dim {}", type_text(in[0]), heads, hd);
      if (heads_of(c, 1, "k", hd) != kv_heads)
        c.error("k {} is not n_kv_heads {} x head_dim {}", type_text(in[1]), kv_heads, hd);
      activation(c, 2, "v");
      same_shape(c, 1, 2, "k", "v");
      if (in[1].shape[0] != in[0].shape[0]) c.error("q and k have different row counts");
      for (int w : {3, 4}) {
        activation(c, w, "norm weight");
        if (in[w].shape != Shape{hd})
          c.error("norm weight (input {}) {} must be f32[{}]", w, type_text(in[w]), hd);
      }
      if (c.float_attr("eps") < 0) c.error("eps must be >= 0");
      c.index_vector(5, "positions", in[0].shape[0]);
      c.state_or_effect(6);
      c.index_vector(7, "slots", in[0].shape[0]);
      return {in[0], token()};
    }
    case Op::NormMatmulArgmax: {
      activation(c, 0, "x");
      c.rank(0, "x", 2);
      norm_weight(c, 0, 1);
      c.weight(2, in[0].shape[1]);
      return {i32({in[0].shape[0]})};
    }
  }
  c.error("no type rule");
}

}  // namespace

std::vector<ValueType> infer_output_types(Op op, const std::vector<ValueType>& inputs,
                                          const Attrs& attrs) {
  const Checker c(op, inputs, attrs);
  const int arity = op_info(op).arity;
  const int optional = optional_inputs(op);
  const int n = static_cast<int>(inputs.size());
  if (arity >= 0 && (n < arity || n > arity + optional)) {
    if (optional == 0) c.error("takes {} inputs, got {}", arity, n);
    c.error("takes {} to {} inputs, got {}", arity, arity + optional, n);
  }
  return infer(c, op, inputs);
}

}  // namespace kiln::graph

#include "kiln/graph/builder.h"

#include "kiln/base/error.h"

namespace kiln::graph {
namespace {

// Tensor names such as "blk.0.attn_q.weight" make good value names; other characters become _.
std::string value_name_for(const std::string& tensor_name) {
  std::string out = tensor_name;
  for (char& ch : out) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '_' || ch == '.';
    if (!ok) ch = '_';
  }
  return out;
}

}  // namespace

Value Builder::emit(Op op, std::vector<Value> inputs, Attrs attrs) {
  std::vector<ValueType> in_types;
  for (const Value& v : inputs) {
    KILN_CHECK(v.valid() && v.node < graph_.num_nodes(), "{}: input is not a value of this graph",
               op_name(op));
    in_types.push_back(graph_.type(v));
  }
  Node node;
  node.op = op;
  node.outputs = infer_output_types(op, in_types, attrs);
  node.inputs = std::move(inputs);
  node.attrs = std::move(attrs);
  return graph_.add_node(std::move(node));
}

Value Builder::source(Op op, const std::string& name, DType dtype, const Shape& shape) {
  KILN_CHECK(!name.empty(), "{}: a source needs a name", op_name(op));
  KILN_CHECK(dtype != DType::Token, "{} {}: a source cannot be an effect token", op_name(op), name);
  Node node;
  node.op = op;
  node.attrs.set("name", name);
  node.outputs = {ValueType{dtype, shape}};
  node.names = {value_name_for(name)};
  return graph_.add_node(std::move(node));
}

Value Builder::input(const std::string& name, DType dtype, const Shape& shape) {
  return source(Op::Input, name, dtype, shape);
}
Value Builder::param(const std::string& name, DType dtype, const Shape& shape) {
  return source(Op::Param, name, dtype, shape);
}
Value Builder::state(const std::string& name, DType dtype, const Shape& shape) {
  return source(Op::State, name, dtype, shape);
}

Value Builder::embedding(Value table, Value ids) { return emit(Op::Embedding, {table, ids}); }
Value Builder::matmul(Value x, Value w) { return emit(Op::Matmul, {x, w}); }

Value Builder::moe_ffn(Value h, Value router, Value gate_exps, Value up_exps, Value down_exps,
                       int top_k, bool norm_topk_prob, const MoeRoute& route) {
  KILN_CHECK(router.valid() && router.node < graph_.num_nodes(),
             "moe_ffn: router is not a value of this graph");
  Attrs a;
  a.set("n_experts", graph_.type(router).shape[0]);
  a.set("top_k", int64_t{top_k});
  a.set("norm_topk_prob", int64_t{norm_topk_prob ? 1 : 0});
  if (route.sigmoid) a.set("sigmoid", int64_t{1});
  if (route.n_groups != 1) {
    a.set("n_groups", int64_t{route.n_groups});
    a.set("topk_groups", int64_t{route.topk_groups});
  }
  if (route.routed_scale != 1.0) a.set("routed_scale", route.routed_scale);
  if (route.softmax_topk) a.set("softmax_topk", int64_t{1});
  if (route.swiglu_limit > 0) {
    a.set("swiglu_alpha", route.swiglu_alpha);
    a.set("swiglu_limit", route.swiglu_limit);
  }
  std::vector<Value> inputs{h, router, gate_exps, up_exps, down_exps};
  if (route.score_bias) inputs.push_back(*route.score_bias);
  if (route.expert_biases) {
    a.set("expert_biases", int64_t{1});
    inputs.insert(inputs.end(), route.expert_biases->begin(), route.expert_biases->end());
  }
  return emit(Op::MoeFfn, std::move(inputs), std::move(a));
}

Value Builder::add(Value a, Value b) { return emit(Op::Add, {a, b}); }
Value Builder::mul(Value a, Value b) { return emit(Op::Mul, {a, b}); }

Value Builder::scale(Value x, double factor) {
  Attrs a;
  a.set("factor", factor);
  return emit(Op::Scale, {x}, std::move(a));
}

Value Builder::gelu(Value x) { return emit(Op::Gelu, {x}); }
Value Builder::gelu_erf(Value x) { return emit(Op::GeluErf, {x}); }
Value Builder::silu(Value x) { return emit(Op::Silu, {x}); }

Value Builder::softcap(Value x, double cap) {
  Attrs a;
  a.set("cap", cap);
  return emit(Op::Softcap, {x}, std::move(a));
}

Value Builder::rms_norm(Value x, Value w, double eps) {
  Attrs a;
  a.set("eps", eps);
  return emit(Op::RmsNorm, {x, w}, std::move(a));
}

Value Builder::layer_norm(Value x, Value w, std::optional<Value> bias, double eps) {
  Attrs a;
  a.set("eps", eps);
  std::vector<Value> inputs = {x, w};
  if (bias) inputs.push_back(*bias);
  return emit(Op::LayerNorm, std::move(inputs), std::move(a));
}

Value Builder::rope(Value x, Value positions, int head_dim, double freq_base, bool neox,
                    std::optional<Value> freq_factors, int n_rot) {
  Attrs a;
  a.set("head_dim", int64_t{head_dim});
  a.set("freq_base", freq_base);
  a.set("neox", int64_t{neox ? 1 : 0});
  if (n_rot != 0 && n_rot != head_dim) a.set("n_rot", int64_t{n_rot});
  std::vector<Value> inputs = {x, positions};
  if (freq_factors) inputs.push_back(*freq_factors);
  return emit(Op::Rope, std::move(inputs), std::move(a));
}

Value Builder::reshape(Value x, const Shape& shape) {
  std::vector<int64_t> dims;
  for (int i = 0; i < shape.rank(); ++i) dims.push_back(shape[i]);
  Attrs a;
  a.set("shape", std::move(dims));
  return emit(Op::Reshape, {x}, std::move(a));
}

Value Builder::take_rows(Value x, Value rows) { return emit(Op::TakeRows, {x, rows}); }

Value Builder::kv_write(Value kv, Value k, Value v, Value slots, int layer) {
  Attrs a;
  a.set("layer", int64_t{layer});
  return emit(Op::KvWrite, {kv, k, v, slots}, std::move(a));
}

Value Builder::attention(Value q, Value kv_token, Value block_table, Value seq_lens,
                         Value positions, Value token_seq, const AttentionSpec& spec) {
  Attrs a;
  a.set("layer", int64_t{spec.layer});
  a.set("n_heads", int64_t{spec.n_heads});
  a.set("n_kv_heads", int64_t{spec.n_kv_heads});
  a.set("head_dim", int64_t{spec.head_dim});
  a.set("window", int64_t{spec.window});
  a.set("scale", static_cast<double>(spec.scale));
  // Only when set: graphs (and their text, and compile-cache keys) of uncapped models stay as
  // they were.
  if (spec.softcap != 0.0f) a.set("softcap", static_cast<double>(spec.softcap));
  std::vector<Value> inputs{q, kv_token, block_table, seq_lens, positions, token_seq};
  if (spec.sinks) inputs.push_back(*spec.sinks);
  return emit(Op::Attention, std::move(inputs), std::move(a));
}

Value Builder::argmax(Value x) { return emit(Op::Argmax, {x}); }
Value Builder::all_reduce(Value x) { return emit(Op::AllReduce, {x}); }
Value Builder::all_gather_vocab(Value logits_slice, int64_t vocab) {
  Attrs a;
  a.set("vocab", vocab);
  return emit(Op::AllGatherVocab, {logits_slice}, std::move(a));
}
Value Builder::all_argmax(Value logits_slice, int64_t vocab) {
  Attrs a;
  a.set("vocab", vocab);
  return emit(Op::AllArgmax, {logits_slice}, std::move(a));
}

Value Builder::named(Value v, std::string name) {
  KILN_CHECK(v.valid() && v.node < graph_.num_nodes(), "named: not a value of this graph");
  graph_.set_value_name(v, std::move(name));
  return v;
}

Graph Builder::finish() {
  KILN_CHECK(!graph_.outputs().empty(), "graph {} has no outputs", graph_.name());
  verify(graph_);
  return std::move(graph_);
}

}  // namespace kiln::graph

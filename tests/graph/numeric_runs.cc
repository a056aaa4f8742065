#include "graph/numeric_runs.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "graph/random_weights.h"
#include "kiln/base/error.h"

namespace kiln::graph::testing {
namespace {

Tensor copy_of(const Tensor& t) {
  if (!t.defined() || t.data() == nullptr) return Tensor();
  Tensor out = Tensor::empty(t.dtype(), t.shape());
  std::memcpy(out.data(), t.data(), t.nbytes());
  return out;
}

Tensor i32_tensor(const std::vector<int32_t>& v, const Shape& shape) {
  Tensor t = Tensor::empty(DType::I32, shape);
  KILN_CHECK(static_cast<int64_t>(v.size()) == shape.numel(), "i32_tensor: size mismatch");
  std::copy(v.begin(), v.end(), t.data_as<int32_t>());
  return t;
}

// Describes element i of a tensor for a failure message.
std::string element_text(const Tensor& t, int64_t i) {
  if (t.dtype() == DType::F32) return fmt::format("{}", t.data_as<float>()[i]);
  if (t.dtype() == DType::I32) return fmt::format("{}", t.data_as<int32_t>()[i]);
  return "?";
}

}  // namespace

RunResult run_interpreted(const Graph& g, const StepData& data, WeightProvider& weights,
                          ThreadPool& pool) {
  RunResult r;
  std::vector<Binding> bindings = data.inputs;
  if (data.kv_pool.data() != nullptr) {
    r.kv_pool = copy_of(data.kv_pool);
    bindings.push_back({data.state_name, r.kv_pool});
  }
  Interpreter interp(pool, weights, data.kv);
  for (const Tensor& t : interp.run(g, bindings)) r.outputs.push_back(copy_of(t));
  return r;
}

RunResult run_planned(const Graph& g, const StepData& data, WeightProvider& weights,
                      ThreadPool& pool, const PlanOptions& options, int replays) {
  RunResult r;
  r.kv_pool = copy_of(data.kv_pool);  // an empty Tensor (null data) when there is no state
  std::unique_ptr<Plan> plan = Plan::prepare(g, options);
  // Garbage, not zeros, in the arena and the output buffers: a step that reads a buffer
  // nothing wrote, or an output that is never written, shows up as a difference.
  Tensor arena =
      Tensor::empty(DType::I8, {static_cast<int64_t>(std::max<size_t>(plan->arena_bytes(), 64))});
  std::memset(arena.data(), 0xA5, arena.nbytes());
  plan->bind(arena.data(), weights, data.kv, r.kv_pool.data(), pool.size());
  Tensor scratch =
      Tensor::empty(DType::I8, {static_cast<int64_t>(std::max<size_t>(plan->scratch_bytes(), 64))});
  std::memset(scratch.data(), 0xA5, scratch.nbytes());
  plan->set_scratch(scratch.data());
  for (const Binding& b : data.inputs) {
    PlanBuffer* in = plan->find_input(b.name);
    if (in == nullptr) continue;  // an input the graph does not read
    KILN_CHECK(in->tensor.nbytes() == b.tensor.nbytes(), "input {}: {} bytes, plan wants {}",
               b.name, b.tensor.nbytes(), in->tensor.nbytes());
    std::memcpy(in->tensor.data(), b.tensor.data(), b.tensor.nbytes());
  }
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const Tensor& out = plan->output(static_cast<int>(i));
    std::memset(out.data(), 0xFF, out.nbytes());
  }
  for (int k = 0; k < replays; ++k) {
    plan->check_state(r.kv_pool.data());
    plan->replay(pool);
  }
  for (size_t i = 0; i < g.outputs().size(); ++i)
    r.outputs.push_back(copy_of(plan->output(static_cast<int>(i))));
  return r;
}

::testing::AssertionResult same_bits(const RunResult& want, const RunResult& got) {
  if (want.outputs.size() != got.outputs.size())
    return ::testing::AssertionFailure()
           << want.outputs.size() << " outputs vs " << got.outputs.size();
  for (size_t i = 0; i < want.outputs.size(); ++i) {
    const Tensor& a = want.outputs[i];
    const Tensor& b = got.outputs[i];
    if (a.dtype() != b.dtype() || a.shape() != b.shape())
      return ::testing::AssertionFailure()
             << "output " << i << " is " << dtype_name(b.dtype()) << b.shape().str() << ", want "
             << dtype_name(a.dtype()) << a.shape().str();
    if (std::memcmp(a.data(), b.data(), a.nbytes()) != 0) {
      const size_t elem = a.dtype() == DType::F32 || a.dtype() == DType::I32 ? 4 : 1;
      int64_t first = 0;
      while (std::memcmp(static_cast<const char*>(a.data()) + first * elem,
                         static_cast<const char*>(b.data()) + first * elem, elem) == 0)
        ++first;
      return ::testing::AssertionFailure()
             << "output " << i << " " << a.shape().str() << " differs first at element " << first
             << " (row " << first / a.shape().cols() << "): " << element_text(b, first) << ", want "
             << element_text(a, first);
    }
  }
  const bool want_pool = want.kv_pool.data() != nullptr, got_pool = got.kv_pool.data() != nullptr;
  if (want_pool != got_pool || (want_pool && want.kv_pool.nbytes() != got.kv_pool.nbytes()))
    return ::testing::AssertionFailure() << "KV pools of different sizes";
  if (want_pool &&
      std::memcmp(want.kv_pool.data(), got.kv_pool.data(), want.kv_pool.nbytes()) != 0) {
    const auto* a = static_cast<const uint16_t*>(want.kv_pool.data());
    const auto* b = static_cast<const uint16_t*>(got.kv_pool.data());
    int64_t first = 0;
    while (a[first] == b[first]) ++first;
    return ::testing::AssertionFailure() << "KV pool differs first at f16 element " << first;
  }
  return ::testing::AssertionSuccess();
}

StepData paged_step(int64_t T, const KvGeometry& kv, uint64_t seed, bool inert_last_row) {
  StepData d;
  d.kv = kv;
  const int64_t kv_dim = static_cast<int64_t>(kv.n_kv_heads) * kv.head_dim;
  d.kv_pool = random_tensor(
      DType::F16, {2 * static_cast<int64_t>(kv.n_layers), kv.n_pages, kv.page_size, kv_dim}, seed);
  const int64_t real = inert_last_row ? T - 1 : T;
  KILN_CHECK(real >= 1, "paged_step: no real row");
  const int64_t S = std::min<int64_t>(real, 3);
  constexpr int64_t kMaxPages = 4;
  KILN_CHECK(S * kMaxPages <= kv.n_pages, "paged_step: the pool needs {} pages", S * kMaxPages);

  std::vector<int32_t> table(S * kMaxPages), lens(S);
  for (int64_t s = 0; s < S; ++s) {
    for (int64_t j = 0; j < kMaxPages; ++j)
      table[s * kMaxPages + j] = static_cast<int32_t>(kv.n_pages - 1 - (s * kMaxPages + j));
  }
  std::vector<int32_t> pos(T), seq(T), slots(T);
  int64_t row = 0;
  for (int64_t s = 0; s < S; ++s) {
    const int64_t n = real / S + (s < real % S ? 1 : 0);  // rows of this sequence
    const int64_t history = 5 + 13 * s;                   // keys already in the pool
    KILN_CHECK((history + n + kv.page_size - 1) / kv.page_size <= kMaxPages,
               "paged_step: too long");
    for (int64_t i = 0; i < n; ++i, ++row) {
      const int64_t p = history + i;
      pos[row] = static_cast<int32_t>(p);
      seq[row] = static_cast<int32_t>(s);
      slots[row] = static_cast<int32_t>(table[s * kMaxPages + p / kv.page_size] * kv.page_size +
                                        p % kv.page_size);
    }
    lens[s] = static_cast<int32_t>(history + n);
  }
  for (; row < T; ++row) {  // padding: inert
    pos[row] = 0;
    seq[row] = -1;
    slots[row] = -1;
  }
  d.inputs.push_back({"positions", i32_tensor(pos, {T})});
  d.inputs.push_back({"token_seq", i32_tensor(seq, {T})});
  d.inputs.push_back({"out_cache_slots", i32_tensor(slots, {T})});
  d.inputs.push_back({"block_table", i32_tensor(table, {S, kMaxPages})});
  d.inputs.push_back({"seq_lens", i32_tensor(lens, {S})});
  return d;
}

std::map<std::string, Value> declare_inputs(Builder& b, const StepData& data) {
  std::map<std::string, Value> out;
  for (const Binding& in : data.inputs)
    out[in.name] = b.input(in.name, in.tensor.dtype(), in.tensor.shape());
  return out;
}

Binding random_input(const std::string& name, const Shape& shape, uint64_t seed) {
  return {name, random_tensor(DType::F32, shape, seed)};
}

}  // namespace kiln::graph::testing

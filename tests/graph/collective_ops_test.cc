// The tensor-parallel collectives (all_reduce, all_gather_vocab, all_argmax) run through the
// interpreter on a group of threads standing in for MPI ranks: the results every rank gets,
// the rank-order sum, the distributed argmax's tie rule, and how the IR treats them (text
// form, shape rules, schedule chain, never merged by CSE).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <thread>

#include "graph/thread_group.h"
#include "kiln/base/thread_pool.h"
#include "kiln/graph/interpreter.h"
#include "kiln/graph/parser.h"
#include "kiln/graph/passes/cse.h"
#include "kiln/graph/printer.h"
#include "kiln/graph/schedule.h"

namespace kiln::graph {
namespace {

// Weights are not read by these graphs; only the group matters.
class GroupOnly : public WeightProvider {
 public:
  explicit GroupOnly(Communicator* comm) : comm_(comm) {}
  const Tensor& raw(const Node&) override { throw Error("no weights"); }
  const kernels::PackedWeight& packed(const Node&) override { throw Error("no weights"); }
  const kernels::PackedExperts& packed_experts(const std::vector<const Node*>&) override {
    throw Error("no weights");
  }
  Communicator* communicator() override { return comm_; }

 private:
  Communicator* comm_;
};

// Runs `ir_of(rank)` with input "x" = inputs[rank] on every rank of a group of `ranks` threads
// (each with a pool of `threads` workers); returns every rank's first output.
std::vector<Tensor> run_on_group(int ranks, int threads,
                                 const std::function<std::string(int)>& ir_of,
                                 const std::vector<Tensor>& inputs) {
  kiln::testing::ThreadGroup group(ranks);
  std::vector<Tensor> results(ranks);
  std::vector<std::string> errors(ranks);
  std::vector<std::thread> workers;
  for (int r = 0; r < ranks; ++r) {
    workers.emplace_back([&, r] {
      try {
        auto comm = group.member(r);
        GroupOnly weights(comm.get());
        ThreadPool pool(threads);
        Interpreter interp(pool, weights, KvGeometry{});
        const Graph g = parse(ir_of(r));
        results[r] = interp.run(g, {{"x", inputs[r]}}).at(0);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& w : workers) w.join();
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  return results;
}

Tensor f32_tensor(const Shape& shape, const std::vector<float>& values) {
  Tensor t = Tensor::empty(DType::F32, shape);
  std::copy(values.begin(), values.end(), t.data_as<float>());
  return t;
}

TEST(CollectiveOps, AllReduceAddsInRankOrderOnEveryRank) {
  // 1 + 1e8 - 1e8 in float depends on the order: rank order ((p0 + p1) + p2) gives 0 (the 1 is
  // lost in 1e8), the reverse ((p2 + p1) + p0) gives 1.
  const std::vector<Tensor> parts = {f32_tensor({1, 2}, {1, 3}), f32_tensor({1, 2}, {1e8f, 4}),
                                     f32_tensor({1, 2}, {-1e8f, 5})};
  auto ir = [](int) {
    return std::string(R"IR(graph g() {
  %x = input "x" : f32[1,2]
  %0 = all_reduce(%x) : f32[1,2]
  return %0
})IR");
  };
  const auto out = run_on_group(3, 2, ir, parts);
  for (const Tensor& t : out) {
    EXPECT_EQ(t.data_as<float>()[0], 0.0f);
    EXPECT_EQ(t.data_as<float>()[1], 12.0f);
  }
}

// Vocabulary 5 over 2 ranks: rank 0 holds ids [0, 3), rank 1 ids [3, 5).
std::string vocab_ir(int rank, const char* op, const char* out_type) {
  const int cols = rank == 0 ? 3 : 2;
  return fmt::format(R"IR(graph g() {{
  %x = input "x" : f32[3,{}]
  %0 = {}(%x) {{vocab=5}} : {}
  return %0
}})IR",
                     cols, op, out_type);
}

TEST(CollectiveOps, AllGatherVocabConcatenatesTheSlices) {
  const std::vector<Tensor> slices = {f32_tensor({3, 3}, {0, 1, 2, 10, 11, 12, 20, 21, 22}),
                                      f32_tensor({3, 2}, {3, 4, 13, 14, 23, 24})};
  const auto out = run_on_group(
      2, 1, [](int r) { return vocab_ir(r, "all_gather_vocab", "f32[3,5]"); }, slices);
  for (const Tensor& t : out) {
    ASSERT_EQ(t.shape(), (Shape{3, 5}));
    for (int row = 0; row < 3; ++row)
      for (int id = 0; id < 5; ++id) EXPECT_EQ(t.data_as<float>()[row * 5 + id], 10 * row + id);
  }
}

TEST(CollectiveOps, AllArgmaxTakesTheLowestIdAmongTiesAndSkipsNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Row 0: the maximum 7 on both ranks (ids 1 and 4): id 1. Row 1: rank 1 wins (id 3).
  // Row 2: every value NaN on rank 0, so rank 1's -1 wins (id 4 is the larger of -2, -1).
  const std::vector<Tensor> slices = {f32_tensor({3, 3}, {1, 7, 7, 0, 2, 2, nan, nan, nan}),
                                      f32_tensor({3, 2}, {7, 3, 9, 9, -2, -1})};
  const auto out = run_on_group(
      2, 2, [](int r) { return vocab_ir(r, "all_argmax", "i32[3]"); }, slices);
  for (const Tensor& t : out) {
    EXPECT_EQ(t.data_as<int32_t>()[0], 1);
    EXPECT_EQ(t.data_as<int32_t>()[1], 3);
    EXPECT_EQ(t.data_as<int32_t>()[2], 4);
  }
}

TEST(CollectiveOps, LoweringWithoutAGroupIsAClearError) {
  GroupOnly weights(nullptr);
  ThreadPool pool(1);
  Interpreter interp(pool, weights, KvGeometry{});
  const Graph g = parse(R"IR(graph g() {
  %x = input "x" : f32[1,2]
  %0 = all_reduce(%x) : f32[1,2]
  return %0
})IR");
  try {
    interp.run(g, {{"x", f32_tensor({1, 2}, {1, 2})}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no tensor-parallel group"), std::string::npos)
        << e.what();
  }
}

TEST(CollectiveOps, TextFormRoundTripsAndShapesAreChecked) {
  const std::string text = R"IR(graph g() {
  %x = input "x" : f32[2,3]
  %0 = all_reduce(%x) : f32[2,3]
  %1 = all_gather_vocab(%0) {vocab=5} : f32[2,5]
  %2 = all_argmax(%0) {vocab=5} : i32[2]
  return %1, %2
})IR";
  EXPECT_EQ(print(parse(print(parse(text)))), print(parse(text)));
  // A slice wider than the vocabulary cannot be one rank's part of it.
  EXPECT_THROW(parse(R"IR(graph g() {
  %x = input "x" : f32[2,6]
  %0 = all_argmax(%x) {vocab=5} : i32[2]
  return %0
})IR"),
               Error);
}

TEST(CollectiveOps, ScheduleChainsCollectivesAndCseKeepsBoth) {
  // Two independent all_reduces of the same value would share a level (and CSE would merge
  // them as duplicates): each is a meeting of all ranks, so both stay, one level apart.
  Graph g = parse(R"IR(graph g() {
  %x = input "x" : f32[2,3]
  %0 = all_reduce(%x) : f32[2,3]
  %1 = all_reduce(%x) : f32[2,3]
  %2 = add(%0, %1) : f32[2,3]
  return %2
})IR");
  PassResult r = run_cse(g, PassOptions{});
  EXPECT_FALSE(r.changed);
  const std::vector<int> level = node_levels(g);
  EXPECT_EQ(level[1], 0);
  EXPECT_EQ(level[2], 1);
  EXPECT_EQ(level[3], 2);
}

}  // namespace
}  // namespace kiln::graph

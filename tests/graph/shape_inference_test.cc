#include <gtest/gtest.h>

#include "kiln/base/error.h"
#include "kiln/graph/ir.h"

namespace kiln::graph {
namespace {

ValueType t(DType d, Shape s) { return ValueType{d, s}; }
const ValueType kTok{DType::Token, Shape{}};

Attrs attrs(std::initializer_list<std::pair<const char*, AttrValue>> items) {
  Attrs a;
  for (const auto& [k, v] : items) a.set(k, v);
  return a;
}

void expect_error(Op op, const std::vector<ValueType>& in, const Attrs& a,
                  const std::string& needle) {
  try {
    infer_output_types(op, in, a);
    FAIL() << op_name(op) << " accepted bad input";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ShapeInference, GemmAndElementwise) {
  EXPECT_EQ(infer_output_types(Op::Matmul, {t(DType::F32, {3, 256}), t(DType::Q4_K, {10, 256})}, {})
                .size(),
            1u);
  // K=64 is not a whole number of q4_k blocks (256).
  expect_error(Op::Matmul, {t(DType::F32, {3, 64}), t(DType::Q4_K, {10, 64})}, {},
               "not a multiple of the q4_k block");
  EXPECT_EQ(
      infer_output_types(Op::Matmul, {t(DType::F32, {3, 64}), t(DType::Q8_0, {10, 64})}, {})[0],
      t(DType::F32, {3, 10}));
  expect_error(Op::Matmul, {t(DType::F32, {3, 64}), t(DType::Q8_0, {10, 32})}, {},
               "has K=32, x has K=64");
  expect_error(Op::Matmul, {t(DType::F16, {3, 64}), t(DType::Q8_0, {10, 64})}, {},
               "x (input 0) must be f32");
  expect_error(Op::Matmul, {t(DType::F32, {3, 64})}, {}, "matmul: takes 2 inputs, got 1");
  // add: same shape or a [cols] bias.
  EXPECT_EQ(infer_output_types(Op::Add, {t(DType::F32, {3, 8}), t(DType::F32, {8})}, {})[0],
            t(DType::F32, {3, 8}));
  expect_error(Op::Add, {t(DType::F32, {3, 8}), t(DType::F32, {3})}, {},
               "must equal a [3,8] or be [8]");
  expect_error(Op::Scale, {t(DType::F32, {3})}, {}, "missing attribute 'factor'");
  expect_error(Op::Scale, {t(DType::F32, {3})}, attrs({{"factor", std::string("x")}}),
               "is a string, expected a float");
  EXPECT_EQ(
      infer_output_types(Op::Embedding, {t(DType::Q8_0, {100, 64}), t(DType::I32, {5})}, {})[0],
      t(DType::F32, {5, 64}));
  EXPECT_EQ(infer_output_types(Op::Argmax, {t(DType::F32, {5, 100})}, {})[0], t(DType::I32, {5}));
}

TEST(ShapeInference, ShapeOps) {
  EXPECT_EQ(infer_output_types(Op::Reshape, {t(DType::F32, {2, 64})},
                               attrs({{"shape", std::vector<int64_t>{2, 2, 32}}}))[0],
            t(DType::F32, {2, 2, 32}));
  expect_error(Op::Reshape, {t(DType::F32, {2, 64})},
               attrs({{"shape", std::vector<int64_t>{2, 2, 31}}}),
               "has 128 elements, shape [2,2,31] has 124");
  expect_error(Op::Reshape, {t(DType::Q8_0, {2, 64})},
               attrs({{"shape", std::vector<int64_t>{8, 16}}}), "would not be whole q8_0 blocks");
  EXPECT_EQ(infer_output_types(Op::Cast, {t(DType::F32, {2})},
                               attrs({{"dtype", std::string("bf16")}}))[0],
            t(DType::BF16, {2}));
  expect_error(Op::Cast, {t(DType::F32, {2})}, attrs({{"dtype", std::string("q4_0")}}),
               "not supported");
  EXPECT_EQ(infer_output_types(Op::TakeRows, {t(DType::F32, {5, 7}), t(DType::I32, {2})}, {})[0],
            t(DType::F32, {2, 7}));
}

TEST(ShapeInference, StateOpsUseEffectTokens) {
  const Attrs layer = attrs({{"layer", int64_t{0}}});
  const ValueType k = t(DType::F32, {2, 32});
  const ValueType slots = t(DType::I32, {2});
  EXPECT_EQ(infer_output_types(Op::KvWrite, {t(DType::F16, {4, 32}), k, k, slots}, layer)[0], kTok);
  EXPECT_EQ(infer_output_types(Op::KvWrite, {kTok, k, k, slots}, layer)[0], kTok);
  expect_error(Op::KvWrite, {kTok, k, t(DType::F32, {2, 16}), slots}, layer,
               "must have the same shape");
  expect_error(Op::KvWrite, {kTok, k, k, t(DType::I32, {3})}, layer,
               "slots (input 3) must have 2 entries");
  const Attrs spec = attrs({{"layer", int64_t{0}},
                            {"n_heads", int64_t{4}},
                            {"n_kv_heads", int64_t{2}},
                            {"head_dim", int64_t{16}},
                            {"window", int64_t{0}},
                            {"scale", 0.25}});
  const std::vector<ValueType> in = {t(DType::F32, {2, 64}), kTok,  t(DType::I32, {3, 8}),
                                     t(DType::I32, {3}),     slots, slots};
  EXPECT_EQ(infer_output_types(Op::Attention, in, spec)[0], t(DType::F32, {2, 64}));
  auto bad = in;
  bad[1] = t(DType::F16, {4, 32});
  expect_error(Op::Attention, bad, spec, "kv (input 1) must be an effect token");
  bad = in;
  bad[0] = t(DType::F32, {2, 48});
  expect_error(Op::Attention, bad, spec, "is not n_heads 4 x head_dim 16");
  // softcap is optional; when present it must be a positive cap.
  Attrs capped = spec;
  capped.set("softcap", 50.0);
  EXPECT_EQ(infer_output_types(Op::Attention, in, capped)[0], t(DType::F32, {2, 64}));
  capped.set("softcap", 0.0);
  expect_error(Op::Attention, in, capped, "softcap must be positive");
  capped.set("softcap", -1.0);
  expect_error(Op::Attention, in, capped, "softcap must be positive");
  expect_error(Op::Rope, {t(DType::F32, {2, 64}), slots},
               attrs({{"head_dim", int64_t{15}}, {"freq_base", 1e4}, {"neox", int64_t{0}}}),
               "head_dim 15 must be even");
}

TEST(ShapeInference, FusedOps) {
  const ValueType x = t(DType::F32, {2, 64});
  auto outs = infer_output_types(Op::MatmulSplit, {x, t(DType::Q8_0, {96, 64})},
                                 attrs({{"splits", std::vector<int64_t>{64, 16, 16}}}));
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(outs[1], t(DType::F32, {2, 16}));
  expect_error(Op::MatmulSplit, {x, t(DType::Q8_0, {96, 64})},
               attrs({{"splits", std::vector<int64_t>{64, 16}}}),
               "splits sum to 80, weight has 96 rows");
  EXPECT_EQ(infer_output_types(Op::AddRmsNorm, {x, x, t(DType::F32, {64})}, attrs({{"eps", 1e-6}}))
                .size(),
            2u);
  expect_error(Op::AddRmsNorm, {x, x, t(DType::F32, {32})}, attrs({{"eps", 1e-6}}),
               "norm weight f32[32] does not match");
  expect_error(Op::MatmulAdd, {x, t(DType::Q8_0, {8, 64}), t(DType::F32, {8})}, {},
               "residual f32[8] must be [2,8]");
  EXPECT_EQ(
      infer_output_types(Op::NormMatmulArgmax, {x, t(DType::F32, {64}), t(DType::Q8_0, {100, 64})},
                         attrs({{"eps", 1e-6}}))[0],
      t(DType::I32, {2}));
  const Attrs qk = attrs({{"eps", 1e-6},
                          {"head_dim", int64_t{16}},
                          {"freq_base", 1e4},
                          {"neox", int64_t{1}},
                          {"layer", int64_t{0}},
                          {"n_heads", int64_t{4}},
                          {"n_kv_heads", int64_t{1}}});
  const ValueType k = t(DType::F32, {2, 16});
  const ValueType hw = t(DType::F32, {16});
  const ValueType idx = t(DType::I32, {2});
  outs = infer_output_types(Op::QkNormRopeKvWrite, {x, k, k, hw, hw, idx, kTok, idx}, qk);
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0], x);
  EXPECT_EQ(outs[1], kTok);
  expect_error(Op::QkNormRopeKvWrite, {x, k, k, t(DType::F32, {64}), hw, idx, kTok, idx}, qk,
               "must be f32[16]");
}

TEST(ShapeInference, RopeFrequencyFactorsAndPartialRotary) {
  const ValueType x = t(DType::F32, {2, 64});  // 4 heads of 16
  const ValueType pos = t(DType::I32, {2});
  auto rope = [](int64_t n_rot) {
    Attrs a = attrs({{"head_dim", int64_t{16}}, {"freq_base", 1e4}, {"neox", int64_t{1}}});
    if (n_rot != 0) a.set("n_rot", n_rot);
    return a;
  };
  EXPECT_EQ(infer_output_types(Op::Rope, {x, pos, t(DType::F32, {8})}, rope(0))[0], x);
  EXPECT_EQ(infer_output_types(Op::Rope, {x, pos, t(DType::F32, {6})}, rope(12))[0], x);
  EXPECT_EQ(infer_output_types(Op::Rope, {x, pos}, rope(12))[0], x);
  expect_error(Op::Rope, {x, pos, t(DType::F32, {8})}, rope(12), "must have n_rot/2 = 6 entries");
  expect_error(Op::Rope, {x, pos, t(DType::F16, {8})}, rope(0),
               "freq_factors (input 2) must be f32");
  expect_error(Op::Rope, {x, pos, t(DType::F32, {2, 4})}, rope(0), "must have rank 1");
  expect_error(Op::Rope, {x, pos}, rope(7), "n_rot 7 must be even");
  expect_error(Op::Rope, {x, pos}, rope(18), "n_rot 18 must be even and in [2, head_dim 16]");
  expect_error(Op::Rope, {x, pos}, rope(-2), "n_rot -2");
  expect_error(Op::Rope, {x, pos, t(DType::F32, {8}), t(DType::F32, {8})}, rope(0),
               "takes 2 to 3 inputs, got 4");
  expect_error(Op::Rope, {x}, rope(0), "takes 2 to 3 inputs, got 1");

  Attrs qk = rope(12);
  qk.set("eps", 1e-6);
  qk.set("layer", int64_t{0});
  qk.set("n_heads", int64_t{4});
  qk.set("n_kv_heads", int64_t{1});
  const ValueType k = t(DType::F32, {2, 16});
  const ValueType hw = t(DType::F32, {16});
  EXPECT_EQ(infer_output_types(Op::QkNormRopeKvWrite,
                               {x, k, k, hw, hw, pos, kTok, pos, t(DType::F32, {6})}, qk)
                .size(),
            2u);
  expect_error(Op::QkNormRopeKvWrite, {x, k, k, hw, hw, pos, kTok, pos, t(DType::F32, {8})}, qk,
               "freq_factors (input 8)");
}

TEST(ShapeInference, SourcesAreDeclared) {
  expect_error(Op::Param, {}, {}, "declared, not inferred");
}

}  // namespace
}  // namespace kiln::graph

// Mutation test: thousands of deterministic corruptions of valid files (byte flips, truncation at
// every header byte, hostile values written over counts, lengths, types and offsets). Opening
// each, reading all its metadata through every accessor and borrowing every tensor must either
// succeed or throw kiln::Error: never crash, hang, read out of bounds (run it under ASan) or throw
// anything else (std::bad_alloc from a believed count included).
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <random>

#include "kiln/base/error.h"
#include "kiln/model/gguf.h"
#include "model/gguf_test_builder.h"

namespace kiln::model {
namespace {

using namespace kiln::model::testing;

// A file that exercises every value type, nested and empty arrays, and several tensor types.
GgufBuilder rich_builder() {
  GgufBuilder b;
  b.add_string("general.architecture", "llama");
  b.add_u32("general.alignment", 32);
  b.add_kv("u8", GgufType::U8, encode_scalar<uint8_t>(7));
  b.add_kv("i8", GgufType::I8, encode_scalar<int8_t>(-7));
  b.add_kv("u16", GgufType::U16, encode_scalar<uint16_t>(700));
  b.add_kv("i16", GgufType::I16, encode_scalar<int16_t>(-700));
  b.add_kv("i32", GgufType::I32, encode_scalar<int32_t>(-70000));
  b.add_kv("f32", GgufType::F32, encode_scalar(1.5f));
  b.add_kv("bool", GgufType::Bool, encode_scalar<uint8_t>(1));
  b.add_kv("u64", GgufType::U64, encode_scalar<uint64_t>(uint64_t{1} << 40));
  b.add_kv("i64", GgufType::I64, encode_scalar<int64_t>(-1));
  b.add_kv("f64", GgufType::F64, encode_scalar(2.5));
  Bytes strings = encode_string("<pad>");
  Bytes more = encode_string("▁hello");
  strings.insert(strings.end(), more.begin(), more.end());
  b.add_kv("tokens", GgufType::Array, encode_array(GgufType::String, 2, strings));
  Bytes floats = encode_scalar(0.5f);
  Bytes f2 = encode_scalar(-0.5f);
  floats.insert(floats.end(), f2.begin(), f2.end());
  b.add_kv("scores", GgufType::Array, encode_array(GgufType::F32, 2, floats));
  Bytes ints = encode_scalar<int32_t>(1);
  Bytes i2 = encode_scalar<int32_t>(3);
  ints.insert(ints.end(), i2.begin(), i2.end());
  b.add_kv("types", GgufType::Array, encode_array(GgufType::I32, 2, ints));
  Bytes inner = encode_array(GgufType::U8, 2, Bytes{1, 2});
  Bytes inner2 = encode_array(GgufType::Bool, 1, Bytes{0});
  inner.insert(inner.end(), inner2.begin(), inner2.end());
  b.add_kv("nested", GgufType::Array, encode_array(GgufType::Array, 2, inner));
  b.add_kv("empty", GgufType::Array, encode_array(GgufType::String, 0, {}));
  b.add_tensor("token_embd.weight", kQ8_0, {64, 3}, 3 * 2 * 34);
  b.add_tensor("output_norm.weight", kF32, {64}, 64 * 4);
  b.add_tensor("blk.0.ffn_up.weight", kQ4_K, {256, 2}, 2 * 144);
  b.add_tensor("blk.0.attn_q.weight", kF16, {4, 2, 2}, 16 * 2);
  b.add_tensor("blk.0.iq2", kIQ2_XS, {256}, 74);
  b.add_tensor("i8", kI8, {5}, 5);
  return b;
}

struct Outcome {
  int opened = 0;
  int rejected = 0;
  int tensors_read = 0;
};

// Does everything a loader might do with the file; anything but kiln::Error escapes and fails
// the test.
void exercise(const Bytes& bytes, Outcome& outcome) {
  std::shared_ptr<GgufFile> f;
  try {
    f = parse(bytes);
  } catch (const Error&) {
    outcome.rejected += 1;
    return;
  }
  outcome.opened += 1;
  auto attempt = [](auto&& fn) {
    try {
      fn();
    } catch (const Error&) {
    }
  };
  for (const GgufKeyValue& kv : f->metadata()) {
    (void)kv.value.summary();
    attempt([&] { f->get_string(kv.key); });
    attempt([&] { f->get_u32(kv.key); });
    attempt([&] { f->get_i64(kv.key); });
    attempt([&] { f->get_f32(kv.key); });
    attempt([&] { f->get_bool(kv.key); });
    attempt([&] { f->get_string_array(kv.key); });
    attempt([&] { f->get_f32_array(kv.key); });
    attempt([&] { f->get_i32_array(kv.key); });
  }
  attempt([&] { f->architecture(); });
  (void)describe(*f);
  for (const GgufTensorInfo& info : f->tensor_infos()) {
    Tensor t;
    try {
      t = f->tensor(info.name);
    } catch (const Error&) {
      continue;
    }
    // Touch the first and last byte so ASan sees any range outside the buffer.
    const auto* p = static_cast<const volatile uint8_t*>(t.data());
    size_t n = t.nbytes();
    ASSERT_EQ(n, info.nbytes);
    if (n > 0) (void)(p[0] + p[n - 1]);
    outcome.tensors_read += 1;
  }
}

// Values that break naive readers when written over a count, length, type or offset.
uint64_t hostile_u64(std::mt19937_64& rng, size_t file_size) {
  const uint64_t picks[] = {0,
                            1,
                            2,
                            31,
                            32,
                            file_size,
                            file_size + 1,
                            file_size / 2,
                            uint64_t{1} << 31,
                            uint64_t{1} << 32,
                            (uint64_t{1} << 32) - 1,
                            uint64_t{1} << 62,
                            uint64_t{1} << 63,
                            ~uint64_t{0},
                            ~uint64_t{0} - 7};
  if (rng() % 4 == 0) return rng();
  return picks[rng() % std::size(picks)];
}

Bytes mutate(const Bytes& base, const GgufBuilder* fields, std::mt19937_64& rng) {
  Bytes b = base;
  switch (rng() % 4) {
    case 0: {  // flip a few bytes, mostly in the header and infos where they matter
      int flips = 1 + static_cast<int>(rng() % 4);
      size_t limit = fields ? std::min(b.size(), fields->fields.at("data") + 16) : b.size();
      for (int i = 0; i < flips; ++i) b[rng() % limit] ^= static_cast<uint8_t>(1 + rng() % 255);
      break;
    }
    case 1:  // truncate anywhere
      b.resize(rng() % b.size());
      break;
    case 2: {  // a hostile u64 over a u64 field (or any 8 bytes when fields are unknown)
      size_t at =
          fields ? fields->u64_fields[rng() % fields->u64_fields.size()] : rng() % (b.size() - 8);
      put_le<uint64_t>(b, at, hostile_u64(rng, b.size()));
      break;
    }
    case 3: {  // a hostile u32 over a u32 field (types, dimension counts, version)
      size_t at =
          fields ? fields->u32_fields[rng() % fields->u32_fields.size()] : rng() % (b.size() - 4);
      uint32_t v =
          rng() % 3 == 0 ? static_cast<uint32_t>(rng()) : static_cast<uint32_t>(rng() % 16);
      put_le<uint32_t>(b, at, v);
      break;
    }
  }
  return b;
}

TEST(GgufMutation, BuilderFileSurvivesEveryTruncationAndTwoThousandMutations) {
  GgufBuilder builder = rich_builder();
  Bytes base = builder.build();
  Outcome outcome;
  exercise(base, outcome);
  ASSERT_EQ(outcome.opened, 1) << "the unmutated file must open";
  ASSERT_EQ(outcome.tensors_read, 5);  // all but the iq2_xs tensor

  // Cutting any byte up to the end of the last tensor must be caught; only padding may go.
  size_t end_of_data = builder.fields.at("end_of_data");
  for (size_t n = 0; n < end_of_data; ++n) {
    exercise(Bytes(base.begin(), base.begin() + static_cast<ptrdiff_t>(n)), outcome);
  }
  EXPECT_EQ(outcome.opened, 1) << "every truncation must be rejected";

  std::mt19937_64 rng(12345);
  for (int i = 0; i < 2000; ++i) exercise(mutate(base, &builder, rng), outcome);
  // Both paths are exercised: some corruptions are harmless, most are caught.
  EXPECT_GT(outcome.opened, 50);
  EXPECT_GT(outcome.rejected, 1000);
  std::printf("builder file: %d opened, %d rejected, %d tensors read\n", outcome.opened,
              outcome.rejected, outcome.tensors_read);
}

TEST(GgufMutation, FixtureFilesSurviveMutations) {
  std::string dir = testdata_dir();
  ASSERT_FALSE(dir.empty()) << "KILN_TESTDATA is not set; run tests/fixtures/generate_all.py";
  std::mt19937_64 rng(777);
  for (const char* name : {"writer_v3.gguf", "hand_v2.gguf", "align64_v3.gguf"}) {
    std::ifstream in(dir + "/gguf/" + name, std::ios::binary);
    ASSERT_TRUE(in.good()) << name;
    Bytes base((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Outcome outcome;
    exercise(base, outcome);
    ASSERT_EQ(outcome.opened, 1) << name;
    for (int i = 0; i < 700; ++i) exercise(mutate(base, nullptr, rng), outcome);
    EXPECT_GT(outcome.rejected, 100) << name;
    std::printf("%s: %d opened, %d rejected, %d tensors read\n", name, outcome.opened,
                outcome.rejected, outcome.tensors_read);
  }
}

}  // namespace
}  // namespace kiln::model

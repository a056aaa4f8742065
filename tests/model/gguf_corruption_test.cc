// Every way a GGUF file can be broken gives one kiln::Error that names the file and the problem.
#include <gtest/gtest.h>

#include "kiln/base/error.h"
#include "kiln/model/gguf.h"
#include "model/gguf_test_builder.h"

namespace kiln::model {
namespace {

using namespace kiln::model::testing;

// A small valid file: two keys, three tensors.
GgufBuilder valid_builder() {
  GgufBuilder b;
  b.add_string("general.architecture", "llama");
  b.add_u32("llama.block_count", 2);
  b.add_tensor("token_embd.weight", kQ8_0, {64, 3}, 3 * 2 * 34);
  b.add_tensor("output_norm.weight", kF32, {64}, 64 * 4);
  b.add_tensor("blk.0.attn_q.weight", kF16, {4, 2}, 8 * 2);
  return b;
}

// The message of the Error that parsing `bytes` throws; fails the test if none is thrown.
std::string open_error(const Bytes& bytes) {
  try {
    parse(bytes, "broken.gguf");
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "parsing did not throw";
  return "";
}

// Parsing fails with a message that starts with the file's name and contains `text`.
#define EXPECT_OPEN_ERROR(bytes, text)                           \
  do {                                                           \
    std::string message = open_error(bytes);                     \
    EXPECT_EQ(message.rfind("broken.gguf: ", 0), 0u) << message; \
    EXPECT_NE(message.find(text), std::string::npos) << message; \
  } while (0)

TEST(GgufCorruption, ValidBuilderFileOpens) {
  GgufBuilder b = valid_builder();
  auto f = parse(b.build());
  EXPECT_EQ(f->tensor_infos().size(), 3u);
  EXPECT_EQ(f->get_u32("llama.block_count"), 2u);
  EXPECT_EQ(f->tensor("token_embd.weight").shape().str(), "[3,64]");
}

TEST(GgufCorruption, EmptyFile) { EXPECT_OPEN_ERROR(Bytes{}, "file is truncated"); }

TEST(GgufCorruption, BadMagic) {
  Bytes bytes = valid_builder().build();
  bytes[3] = 'X';
  EXPECT_OPEN_ERROR(bytes, "not a GGUF file: it starts with 'GGUX'");
}

TEST(GgufCorruption, Version1IsRejected) {
  GgufBuilder b = valid_builder();
  b.version = 1;
  EXPECT_OPEN_ERROR(b.build(), "GGUF version 1 is not supported");
}

TEST(GgufCorruption, FutureVersionIsRejected) {
  GgufBuilder b = valid_builder();
  b.version = 4;
  EXPECT_OPEN_ERROR(b.build(), "unsupported GGUF version 4");
}

TEST(GgufCorruption, BigEndianIsRejected) {
  GgufBuilder b = valid_builder();
  b.version = 0x03000000;  // 3 written big-endian
  EXPECT_OPEN_ERROR(b.build(), "big-endian");
}

TEST(GgufCorruption, TruncatedAtEveryByteOfTheHeaderAndInfos) {
  GgufBuilder b = valid_builder();
  Bytes full = b.build();
  size_t data = b.fields.at("data");
  for (size_t n = 0; n < data; ++n) {
    Bytes cut(full.begin(), full.begin() + static_cast<ptrdiff_t>(n));
    std::string message = open_error(cut);
    // Cut inside the padding before the data, the infos are complete and the data is missing.
    EXPECT_TRUE(message.find("file is truncated") != std::string::npos ||
                message.find("past the end of the file") != std::string::npos ||
                message.find("cannot fit") != std::string::npos)
        << "cut at " << n << ": " << message;
  }
}

TEST(GgufCorruption, TruncatedTensorData) {
  GgufBuilder b = valid_builder();
  Bytes bytes = b.build();
  bytes.resize(b.fields.at("end_of_data") - 1);  // the padding after the last tensor may go
  EXPECT_OPEN_ERROR(bytes, "runs past the end of the file");
}

TEST(GgufCorruption, HugeTensorCount) {
  GgufBuilder b = valid_builder();
  Bytes bytes = b.build();
  put_le<uint64_t>(bytes, b.fields.at("n_tensors"), uint64_t{1} << 60);
  EXPECT_OPEN_ERROR(bytes, "tensor infos (and 2 metadata keys) cannot fit");
}

TEST(GgufCorruption, HugeKeyCount) {
  GgufBuilder b = valid_builder();
  Bytes bytes = b.build();
  put_le<uint64_t>(bytes, b.fields.at("n_kv"), ~uint64_t{0});
  EXPECT_OPEN_ERROR(bytes, "metadata keys cannot fit");
}

TEST(GgufCorruption, HugeArrayLength) {
  GgufBuilder b;
  b.add_kv("tokenizer.ggml.scores", GgufType::Array,
           encode_array(GgufType::F32, uint64_t{1} << 61, encode_scalar(1.0f)));
  EXPECT_OPEN_ERROR(b.build(), "an array of 2305843009213693952 f32 elements cannot fit");
}

TEST(GgufCorruption, HugeArrayOfStrings) {
  GgufBuilder b;
  // Each string takes at least 8 bytes, so 100 of them cannot fit in the 24 bytes present.
  Bytes three_strings = encode_string("a");
  three_strings.resize(24, 0);
  b.add_kv("tokenizer.ggml.tokens", GgufType::Array,
           encode_array(GgufType::String, 100, three_strings));
  EXPECT_OPEN_ERROR(b.build(), "an array of 100 string elements cannot fit");
}

TEST(GgufCorruption, StringLengthPastEndOfFile) {
  GgufBuilder b = valid_builder();
  Bytes bytes = b.build();
  put_le<uint64_t>(bytes, b.fields.at("kv1.key_len"), uint64_t{1} << 40);
  EXPECT_OPEN_ERROR(bytes, "metadata key #1: the key is 1099511627776 bytes long");
}

TEST(GgufCorruption, TensorNameLengthPastEndOfFile) {
  GgufBuilder b = valid_builder();
  Bytes bytes = b.build();
  put_le<uint64_t>(bytes, b.fields.at("t2.name_len"), bytes.size());
  EXPECT_OPEN_ERROR(bytes, "tensor info #2: the tensor name is");
}

TEST(GgufCorruption, UnknownValueType) {
  GgufBuilder b = valid_builder();
  Bytes bytes = b.build();
  put_le<uint32_t>(bytes, b.fields.at("kv1.type"), 13);
  EXPECT_OPEN_ERROR(bytes, "metadata key #1 'llama.block_count': unknown metadata value type 13");
}

TEST(GgufCorruption, UnknownArrayElementType) {
  GgufBuilder b;
  b.add_kv("x", GgufType::Array, encode_array(static_cast<GgufType>(200), 0, {}));
  EXPECT_OPEN_ERROR(b.build(), "unknown metadata value type 200");
}

TEST(GgufCorruption, BoolOtherThanZeroOrOne) {
  GgufBuilder b;
  b.add_kv("flag", GgufType::Bool, encode_scalar<uint8_t>(2));
  EXPECT_OPEN_ERROR(b.build(), "'flag': bool value at offset");
}

TEST(GgufCorruption, ArraysNestedTooDeep) {
  Bytes value = encode_array(GgufType::U8, 0, {});
  for (int i = 0; i < 15; ++i) value = encode_array(GgufType::Array, 1, value);
  GgufBuilder ok;
  ok.add_kv("deep", GgufType::Array, value);
  EXPECT_NO_THROW(parse(ok.build()));  // 16 arrays, one inside the other, are fine; 17 are not
  GgufBuilder b;
  b.add_kv("deep", GgufType::Array, encode_array(GgufType::Array, 1, value));
  EXPECT_OPEN_ERROR(b.build(), "arrays nested more than 16 deep");
}

TEST(GgufCorruption, TooManyDimensions) {
  GgufBuilder b;
  b.add_tensor("t", kF32, {1, 1, 1, 1, 2}, 8);
  EXPECT_OPEN_ERROR(b.build(), "tensor 't': 5 dimensions; at most 4 are supported");
}

TEST(GgufCorruption, ZeroDimension) {
  GgufBuilder b;
  b.add_tensor("t", kF32, {4, 0}, 0);
  EXPECT_OPEN_ERROR(b.build(), "tensor 't': dimension 1 is 0");
}

TEST(GgufCorruption, NegativeDimension) {
  GgufBuilder b;
  b.add_tensor("t", kF32, {~uint64_t{0}}, 4);
  EXPECT_OPEN_ERROR(b.build(), "tensor 't': dimension 0 is -1");
}

TEST(GgufCorruption, OverflowingElementCount) {
  GgufBuilder b;
  b.add_tensor("t", kF32, {uint64_t{1} << 32, uint64_t{1} << 32}, 4);
  EXPECT_OPEN_ERROR(b.build(), "tensor 't': the element count overflows");
}

TEST(GgufCorruption, OverflowingByteSize) {
  GgufBuilder b;
  b.add_tensor("t", kF32, {uint64_t{1} << 62}, 4);  // 2^62 elements of 4 bytes
  EXPECT_OPEN_ERROR(b.build(), "tensor 't': the byte size overflows");
}

TEST(GgufCorruption, RowNotAWholeNumberOfBlocks) {
  GgufBuilder b;
  b.add_tensor("t", kQ8_0, {33, 2}, 2 * 34);
  EXPECT_OPEN_ERROR(b.build(),
                    "tensor 't': row length 33 is not a multiple of the q8_0 block size 32");
}

TEST(GgufCorruption, MisalignedTensorOffset) {
  GgufBuilder b;
  b.add_tensor("a", kF32, {4}, 16);
  b.add_tensor("b", kF32, {4}, 16, 16);
  EXPECT_OPEN_ERROR(b.build(), "tensor 'b': data offset 16 is not a multiple of the alignment 32");
}

TEST(GgufCorruption, DataSectionPastEndOfFile) {
  GgufBuilder b = valid_builder();
  Bytes bytes = b.build();
  // Keep the infos but cut the padding after them and every data byte.
  size_t end_of_infos = b.fields.at("t2.offset") + 8;
  ASSERT_LT(end_of_infos, b.fields.at("data"));
  bytes.resize(end_of_infos);
  EXPECT_OPEN_ERROR(bytes, "the tensor data section would start at byte");
}

TEST(GgufCorruption, TensorOffsetPastEndOfFile) {
  GgufBuilder b = valid_builder();
  Bytes bytes = b.build();
  put_le<uint64_t>(bytes, b.fields.at("t1.offset"), uint64_t{1} << 62);
  EXPECT_OPEN_ERROR(bytes, "tensor 'output_norm.weight' (f32 [64], 256 bytes at offset");
}

TEST(GgufCorruption, OverlappingTensors) {
  GgufBuilder b;
  b.add_tensor("a", kF32, {16}, 64);
  b.add_tensor("b", kF32, {8}, 32, 32);  // inside a's bytes 0..64
  EXPECT_OPEN_ERROR(b.build(), "tensors 'a' (bytes 0..64) and 'b' (from byte 32) overlap");
}

TEST(GgufCorruption, UnknownTypeStartingInsideAnotherTensorOverlaps) {
  GgufBuilder b;
  b.add_tensor("a", kF32, {16}, 64);
  b.add_tensor("mystery", 99, {16}, 32, 32);
  EXPECT_OPEN_ERROR(b.build(), "tensors 'a' (bytes 0..64) and 'mystery' (from byte 32) overlap");
}

TEST(GgufCorruption, DuplicateTensorName) {
  GgufBuilder b;
  b.add_tensor("w", kF32, {4}, 16);
  b.add_tensor("w", kF32, {4}, 16);
  EXPECT_OPEN_ERROR(b.build(), "tensor name 'w' appears more than once");
}

TEST(GgufCorruption, DuplicateKey) {
  GgufBuilder b;
  b.add_u32("llama.block_count", 2);
  b.add_u32("llama.block_count", 3);
  EXPECT_OPEN_ERROR(b.build(), "metadata key 'llama.block_count' appears more than once");
}

TEST(GgufCorruption, AlignmentNotAPowerOfTwo) {
  for (uint32_t a : {0u, 3u, 48u}) {
    GgufBuilder b;
    b.add_u32("general.alignment", a);
    EXPECT_OPEN_ERROR(b.build(), "general.alignment is " + std::to_string(a) +
                                     "; it must be a non-zero power of two");
  }
}

TEST(GgufCorruption, AlignmentOfTheWrongType) {
  GgufBuilder b;
  b.add_string("general.alignment", "32");
  EXPECT_OPEN_ERROR(b.build(),
                    "metadata key 'general.alignment' is string \"32\", expected an integer");
}

TEST(GgufCorruption, AlignmentIsHonoured) {
  GgufBuilder b;
  b.alignment = 64;
  b.add_kv("general.alignment", GgufType::U64, encode_scalar<uint64_t>(64));  // any integer type
  b.add_tensor("a", kF32, {3}, 12);
  b.add_tensor("b", kF32, {3}, 12);
  auto f = parse(b.build());
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->tensor_info("b").offset, 64u);
  EXPECT_EQ(f->data_offset() % 64, 0u);
  // Offset 32 is aligned to the default but not to the declared 64.
  GgufBuilder bad;
  bad.alignment = 32;
  bad.add_u32("general.alignment", 64);
  bad.add_tensor("a", kF32, {3}, 12);
  bad.add_tensor("b", kF32, {3}, 12);
  EXPECT_OPEN_ERROR(bad.build(), "data offset 32 is not a multiple of the alignment 64");
}

TEST(GgufCorruption, InvalidUtf8KeysAreAccepted) {
  GgufBuilder b;
  b.add_u32(
      "bad\xff\xfe"
      "key",
      5);
  b.add_tensor("t\xc3", kF32, {1}, 4);
  auto f = parse(b.build());
  EXPECT_EQ(f->get_u32("bad\xff\xfe"
                       "key"),
            5u);
  EXPECT_TRUE(f->has_tensor("t\xc3"));
  // Messages escape the bytes instead of printing them raw.
  GgufBuilder dup;
  dup.add_u32("k\xff", 1);
  dup.add_u32("k\xff", 2);
  EXPECT_OPEN_ERROR(dup.build(), "metadata key 'k\\xff' appears more than once");
}

TEST(GgufCorruption, UnsupportedTensorTypeFailsOnlyWhenRead) {
  GgufBuilder b;
  b.add_tensor("iq2", kIQ2_XS, {256}, 74);
  b.add_tensor("mystery", 99, {16}, 64);
  b.add_tensor("ok", kF32, {2}, 8);
  auto f = parse(b.build(), "model.gguf");
  EXPECT_NO_THROW(f->tensor("ok"));
  const GgufTensorInfo& iq2 = f->tensor_info("iq2");
  EXPECT_FALSE(iq2.dtype.has_value());
  EXPECT_EQ(iq2.nbytes, 74u);
  try {
    f->tensor("iq2");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "model.gguf: tensor 'iq2' has type iq2_xs, which kiln does not support");
  }
  try {
    f->tensor("mystery");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_STREQ(
        e.what(),
        "model.gguf: tensor 'mystery' has type id 99, which is not a ggml type kiln knows");
  }
  EXPECT_EQ(f->tensor_info("mystery").nbytes, 0u);
}

TEST(GgufCorruption, MissingTensor) {
  auto f = parse(valid_builder().build(), "model.gguf");
  try {
    f->tensor("nope");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "model.gguf: no tensor named 'nope'");
  }
}

TEST(GgufCorruption, OpenNamesThePathOfAMissingFile) {
  try {
    GgufFile::open("/nonexistent/dir/model.gguf");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/model.gguf"), std::string::npos);
  }
}

}  // namespace
}  // namespace kiln::model

// The safetensors reader on files built in memory: a good file reads back its tensors, and
// each kind of corruption is one kiln::Error that names the problem.
#include "kiln/model/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kiln/base/error.h"

namespace kiln::model {
namespace {

// 8-byte little-endian header length, the header, then `data`.
std::vector<uint8_t> file_bytes(const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out;
  out.reserve(8 + header.size() + data.size());
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::shared_ptr<SafetensorsFile> parse(const std::vector<uint8_t>& bytes) {
  auto copy = std::make_shared<std::vector<uint8_t>>(bytes);
  return SafetensorsFile::from_bytes(copy->data(), copy->size(), copy, "test.safetensors");
}

// Expects parse() to throw an Error whose one-line message contains `needle`.
void expect_error(const std::vector<uint8_t>& bytes, const std::string& needle) {
  try {
    parse(bytes);
    FAIL() << "no error; expected one containing '" << needle << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_NE(msg.find("test.safetensors"), std::string::npos) << msg;
  }
}

std::vector<uint8_t> data_of(size_t n) {
  std::vector<uint8_t> d(n);
  for (size_t i = 0; i < n; ++i) d[i] = static_cast<uint8_t>(i);
  return d;
}

TEST(Safetensors, ReadsTensorsInPlace) {
  // a: f32 [2, 2] at [0, 16); b: bf16 [3] at [16, 22); metadata is skipped.
  std::vector<uint8_t> data(22);
  const float a[4] = {1.0f, -2.0f, 0.5f, 3.0f};
  std::memcpy(data.data(), a, sizeof a);
  const uint16_t b[3] = {0x3F80, 0x4000, 0xC040};  // 1, 2, -3 in bfloat16
  std::memcpy(data.data() + 16, b, sizeof b);
  auto f = parse(file_bytes(R"({"__metadata__":{"format":"pt"},)"
                            R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[16,22]},)"
                            R"("a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})",
                            data));
  ASSERT_EQ(f->tensors().size(), 2u);
  EXPECT_EQ(f->tensors()[0].name, "a");  // in offset order
  const Tensor ta = f->tensor("a");
  EXPECT_EQ(ta.dtype(), DType::F32);
  EXPECT_EQ(ta.shape(), (Shape{2, 2}));
  EXPECT_EQ(ta.data_as<float>()[3], 3.0f);
  const Tensor tb = f->tensor("b");
  EXPECT_EQ(tb.dtype(), DType::BF16);
  EXPECT_EQ(tb.data_as<uint16_t>()[2], 0xC040);
  EXPECT_EQ(f->find("c"), nullptr);
  EXPECT_THROW(f->tensor("c"), Error);
}

TEST(Safetensors, EmptyFileAndScalars) {
  EXPECT_TRUE(parse(file_bytes("{}", {}))->tensors().empty());
  auto f =
      parse(file_bytes(R"({"s":{"dtype":"F16","shape":[],"data_offsets":[0,2]}})", data_of(2)));
  EXPECT_EQ(f->tensor("s").numel(), 1);
}

TEST(Safetensors, TruncatedHeaderLength) { expect_error({1, 0, 0}, "truncated"); }

TEST(Safetensors, HeaderLengthBeyondFile) {
  auto bytes = file_bytes("{}", {});
  bytes[0] = 200;  // says 200 bytes of header, the file holds 2
  expect_error(bytes, "runs past the end of the file");
}

TEST(Safetensors, HeaderNotJson) {
  expect_error(file_bytes("{not json", data_of(4)), "not a JSON object");
  expect_error(file_bytes("[1, 2]", data_of(4)), "not a JSON object");
}

TEST(Safetensors, MissingFields) {
  expect_error(file_bytes(R"({"a":{"dtype":"F32","shape":[1]}})", data_of(4)), "data_offsets");
}

TEST(Safetensors, OffsetsOutOfRange) {
  expect_error(file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data_of(4)),
               "outside the data section");
  expect_error(file_bytes(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", data_of(4)),
               "outside the data section");
}

TEST(Safetensors, OverlappingTensors) {
  expect_error(file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                          R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                          data_of(12)),
               "overlap");
}

TEST(Safetensors, ShapeTimesDtypeMismatch) {
  expect_error(file_bytes(R"({"a":{"dtype":"BF16","shape":[3],"data_offsets":[0,8]}})", data_of(8)),
               "needs 6");
}

TEST(Safetensors, HugeShapeIsRefusedWithoutOverflow) {
  expect_error(file_bytes(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],)"
                          R"("data_offsets":[0,8]}})",
                          data_of(8)),
               "larger than the file");
}

TEST(Safetensors, UnknownAndUnsupportedDtypes) {
  expect_error(file_bytes(R"({"a":{"dtype":"Q9","shape":[1],"data_offsets":[0,1]}})", data_of(1)),
               "unknown dtype 'Q9'");
  expect_error(file_bytes(R"({"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", data_of(8)),
               "unsupported dtype 'I64'");
}

TEST(Safetensors, OpenNamesMissingFile) {
  EXPECT_THROW(SafetensorsFile::open("/nonexistent/model.safetensors"), Error);
}

}  // namespace
}  // namespace kiln::model

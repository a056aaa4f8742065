// The files written by tests/fixtures/make_gguf_cases.py (with gguf-py's GGUFWriter and by hand)
// read back exactly as its cases.json sidecar says: every key and value in file order, every
// tensor's type, row-major shape, offset, size and bytes.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kiln/base/error.h"
#include "kiln/base/gguf_tensor_types.h"
#include "kiln/model/gguf.h"
#include "model/gguf_test_builder.h"

namespace kiln::model {
namespace {

using nlohmann::json;

std::string to_hex(const void* data, size_t n) {
  std::string s;
  s.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) s += fmt::format("{:02x}", static_cast<const uint8_t*>(data)[i]);
  return s;
}

// The sidecar's encoding of a value: strings as hex, floats as bit patterns.
template <typename T>
json scalar_json(const T& v) {
  if constexpr (std::is_same_v<T, std::string>) {
    return {{"type", "string"}, {"hex", to_hex(v.data(), v.size())}};
  } else if constexpr (std::is_same_v<T, float>) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    return {{"type", "f32"}, {"bits", bits}};
  } else if constexpr (std::is_same_v<T, double>) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    return {{"type", "f64"}, {"bits", bits}};
  } else if constexpr (std::is_same_v<T, bool>) {
    return {{"type", "bool"}, {"value", v}};
  } else {
    static_assert(std::is_integral_v<T>);
    return {
        {"type",
         std::string(gguf_value_type_name(static_cast<GgufType>(GgufValue::Storage(v).index())))},
        {"value", v}};
  }
}

json array_json(const GgufArray& a);

json value_json(const GgufValue& v) {
  if (const GgufArray* a = v.array()) return array_json(*a);
  return std::visit(
      [](const auto& x) -> json {
        if constexpr (std::is_same_v<std::decay_t<decltype(x)>, GgufArray>) {
          return nullptr;  // handled above
        } else {
          return scalar_json(x);
        }
      },
      v.storage());
}

json array_json(const GgufArray& a) {
  json items = json::array();
  std::visit(
      [&](const auto& elements) {
        for (size_t i = 0; i < elements.size(); ++i) {
          using T = typename std::decay_t<decltype(elements)>::value_type;
          if constexpr (std::is_same_v<T, GgufArray>) {
            items.push_back(array_json(elements[i]));
          } else {
            items.push_back(scalar_json(static_cast<T>(elements[i])));
          }
        }
      },
      a.elements);
  return {{"type", "array"},
          {"element_type", std::string(gguf_value_type_name(a.element_type()))},
          {"items", items}};
}

std::string unhex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  return out;
}

class GgufRoundTrip : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::testdata_dir();
    ASSERT_FALSE(dir_.empty()) << "KILN_TESTDATA is not set; run tests/fixtures/generate_all.py";
    std::ifstream in(dir_ + "/gguf/cases.json");
    ASSERT_TRUE(in.good()) << "missing " << dir_ << "/gguf/cases.json";
    sidecar_ = json::parse(in);
  }
  std::string dir_;
  json sidecar_;
};

TEST_F(GgufRoundTrip, EveryFixtureReadsBackAsWritten) {
  ASSERT_EQ(sidecar_["cases"].size(), 4u);
  for (const json& c : sidecar_["cases"]) {
    std::string file = c["file"];
    SCOPED_TRACE(file);
    auto f = GgufFile::open(dir_ + "/gguf/" + file);
    EXPECT_EQ(f->version(), c["version"].get<uint32_t>());
    EXPECT_EQ(f->alignment(), c["alignment"].get<uint32_t>());
    if (c.contains("data_offset")) {
      EXPECT_EQ(f->data_offset(), c["data_offset"].get<uint64_t>());
    }
    EXPECT_EQ(f->architecture(), "kilntest");

    // Metadata: same keys in the same order, same types, same values bit for bit.
    const json& want_kvs = c["metadata"];
    ASSERT_EQ(f->metadata().size(), want_kvs.size());
    for (size_t i = 0; i < want_kvs.size(); ++i) {
      const GgufKeyValue& kv = f->metadata()[i];
      std::string want_key = unhex(want_kvs[i]["key_hex"]);
      SCOPED_TRACE(printable(want_key));
      EXPECT_EQ(kv.key, want_key);
      EXPECT_EQ(value_json(kv.value), want_kvs[i]["value"]);
      EXPECT_EQ(f->find(want_key), &kv.value);
    }

    // Tensors: infos in file order, and each tensor's bytes.
    const json& want_tensors = c["tensors"];
    ASSERT_EQ(f->tensor_infos().size(), want_tensors.size());
    for (size_t i = 0; i < want_tensors.size(); ++i) {
      const GgufTensorInfo& t = f->tensor_infos()[i];
      const json& w = want_tensors[i];
      SCOPED_TRACE(t.name);
      EXPECT_EQ(t.name, w["name"].get<std::string>());
      EXPECT_EQ(t.gguf_type, w["ggml_type"].get<uint32_t>());
      Shape want_shape;
      for (int64_t d : w["shape"]) want_shape.push_back(d);
      EXPECT_EQ(t.shape.str(), want_shape.str());
      EXPECT_EQ(t.offset, w["offset"].get<uint64_t>());
      EXPECT_EQ(t.nbytes, w["nbytes"].get<uint64_t>());
      EXPECT_EQ(t.dtype, dtype_from_gguf(t.gguf_type));
      if (!t.dtype) {
        EXPECT_THROW(f->tensor(t.name), Error);
        continue;
      }
      Tensor x = f->tensor(t.name);
      EXPECT_EQ(x.dtype(), *t.dtype);
      EXPECT_EQ(x.shape().str(), want_shape.str());
      EXPECT_EQ(x.nbytes(), t.nbytes);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(x.data()) % f->alignment(), 0u);
      EXPECT_EQ(to_hex(x.data(), x.nbytes()), w["hex"].get<std::string>());
    }
  }
}

TEST_F(GgufRoundTrip, TypedAccessorsOnTheWriterFile) {
  auto f = GgufFile::open(dir_ + "/gguf/writer_v3.gguf");
  EXPECT_EQ(f->get_u32("test.u32"), 4294967295u);
  EXPECT_EQ(f->get_u32("test.u8"), 255u);  // any integer type that fits
  EXPECT_EQ(f->get_i64("test.i64"), INT64_MIN);
  EXPECT_EQ(f->get_i64("test.i32_negative_one"), -1);
  EXPECT_EQ(f->get_f32("test.f32"), 1.5f);
  EXPECT_EQ(f->get_f32("test.f64"), 3.1415927f);  // f64 narrowed
  EXPECT_TRUE(f->get_bool("test.bool_true"));
  EXPECT_FALSE(f->get_bool("test.bool_false"));
  EXPECT_EQ(f->get_string("test.string"), "héllo ▁wörld 😀");
  EXPECT_EQ(f->get_string_array("arr.string"),
            (std::vector<std::string>{"<pad>", "▁the", "", "tab\there"}));
  EXPECT_EQ(f->get_f32_array("arr.f32"), (std::vector<float>{0.25f, -1.0f, 3.0e38f}));
  EXPECT_EQ(f->get_f32_array("arr.f64"), (std::vector<float>{0.1f, -2.5f}));
  EXPECT_EQ(f->get_i32_array("arr.i32"), (std::vector<int32_t>{-1, 0, INT32_MAX}));
  EXPECT_EQ(f->get_i32_array("arr.u8"), (std::vector<int32_t>{0, 1, 255}));
  EXPECT_EQ(f->get_i32_array("arr.i16"), (std::vector<int32_t>{-32768, 32767}));

  const GgufArray* nested = f->find("arr.nested_i32")->array();
  ASSERT_NE(nested, nullptr);
  ASSERT_EQ(nested->element_type(), GgufType::Array);
  const auto& inner = *nested->get_if<GgufArray>();
  ASSERT_EQ(inner.size(), 2u);
  EXPECT_EQ(*inner[0].get_if<int32_t>(), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(*inner[1].get_if<int32_t>(), (std::vector<int32_t>{3}));
}

TEST_F(GgufRoundTrip, EmptyArraysKeepTheirElementType) {
  auto f = GgufFile::open(dir_ + "/gguf/hand_v2.gguf");
  EXPECT_EQ(f->version(), 2u);
  const GgufArray* a = f->find("test.empty_u32_array")->array();
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->element_type(), GgufType::U32);
  EXPECT_EQ(a->size(), 0u);
  EXPECT_TRUE(f->get_string_array("test.empty_string_array").empty());
  EXPECT_EQ(f->get_string("test.empty_string"), "");
  EXPECT_EQ(f->get_i64(std::string("nul\0inside", 10)), -5);
}

// Every ggml type's block geometry agrees with gguf-py's table, and kiln's dtypes agree with it.
TEST_F(GgufRoundTrip, TensorTypeTableMatchesGgufPy) {
  for (const auto& [id_text, geometry] : sidecar_["ggml_type_sizes"].items()) {
    uint32_t id = static_cast<uint32_t>(std::stoul(id_text));
    SCOPED_TRACE(id);
    const GgufTensorType* t = find_gguf_tensor_type(id);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->block_size, geometry[0].get<int64_t>());
    // gguf-py still lists q8_1 with two f32 scales (40 bytes); ggml's block_q8_1 holds two f16
    // (36 bytes). q8_1 is a scratch type for activations and never stored in model files.
    if (id != 9) {
      EXPECT_EQ(t->block_bytes, geometry[1].get<int64_t>());
    }
  }
  for (int i = 0; i < kNumDTypes; ++i) {
    const DTypeInfo& info = dtype_info(static_cast<DType>(i));
    if (info.gguf_type < 0) continue;
    const GgufTensorType* t = find_gguf_tensor_type(static_cast<uint32_t>(info.gguf_type));
    ASSERT_NE(t, nullptr) << info.name;
    EXPECT_EQ(t->name, info.name);
    EXPECT_EQ(t->block_size, info.block_size);
    EXPECT_EQ(t->block_bytes, info.block_bytes);
  }
}

TEST_F(GgufRoundTrip, DescribeSummarizesTheFile) {
  auto f = GgufFile::open(dir_ + "/gguf/writer_v3.gguf");
  std::string d = describe(*f);
  EXPECT_NE(d.find("GGUF v3, architecture kilntest"), std::string::npos) << d;
  EXPECT_NE(d.find("15 tensors"), std::string::npos) << d;
  EXPECT_NE(d.find("q8_0 x1"), std::string::npos) << d;
  EXPECT_NE(d.find("f32 x4"), std::string::npos) << d;
  EXPECT_NE(d.find("iq2_xs x1 (74 B, unsupported)"), std::string::npos) << d;
}

}  // namespace
}  // namespace kiln::model

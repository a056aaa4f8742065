#include "kiln/model/safetensors.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "kiln/base/error.h"
#include "kiln/base/mmap_file.h"

namespace kiln::model {
namespace {

// Every dtype name the safetensors format defines; the first three are read, and U8 as raw
// bytes (gpt-oss's MXFP4 blocks and scales).
constexpr std::string_view kKnownDtypes[] = {
    "F32", "F16", "BF16", "F64",     "I64",     "I32", "I16",     "I8",      "U64",     "U32",
    "U16", "U8",  "BOOL", "F8_E4M3", "F8_E5M2", "F4",  "F6_E2M3", "F6_E3M2", "F8_E8M0", "C64"};

// A header larger than this is not a checkpoint (real ones are a few MiB at most).
constexpr uint64_t kMaxHeaderBytes = uint64_t{1} << 30;

DType read_dtype(const std::string& file, const std::string& tensor, const std::string& name) {
  if (name == "F32") return DType::F32;
  if (name == "F16") return DType::F16;
  if (name == "BF16") return DType::BF16;
  if (name == "U8") return DType::I8;  // bytes: only the MXFP4 expert recipe reads them
  const bool known =
      std::find(std::begin(kKnownDtypes), std::end(kKnownDtypes), name) != std::end(kKnownDtypes);
  fail("{}: tensor '{}' has {} dtype '{}' (kiln reads F32, F16, BF16 and U8)", file, tensor,
       known ? "unsupported" : "unknown", name);
}

}  // namespace

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path,
                                                       const SkipTensor& skip) {
  auto map = MmapFile::open(path);
  const uint8_t* data = map->data();
  const size_t size = map->size();
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  f->keepalive_ = std::move(map);
  f->data_ = data;
  f->size_ = size;
  f->parse(skip);
  return f;
}

std::shared_ptr<SafetensorsFile> SafetensorsFile::from_bytes(const uint8_t* data, size_t size,
                                                             std::shared_ptr<const void> keepalive,
                                                             std::string name) {
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = std::move(name);
  f->keepalive_ = std::move(keepalive);
  f->data_ = data;
  f->size_ = size;
  f->parse(nullptr);
  return f;
}

void SafetensorsFile::parse(const SkipTensor& skip) {
  KILN_CHECK(size_ >= 8, "{}: truncated safetensors file ({} bytes, no header length)", path_,
             size_);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | data_[i];
  KILN_CHECK(header_len <= size_ - 8 && header_len <= kMaxHeaderBytes,
             "{}: safetensors header length {} runs past the end of the file ({} bytes)", path_,
             header_len, size_);
  data_offset_ = 8 + header_len;
  const char* text = reinterpret_cast<const char*>(data_ + 8);
  auto header = nlohmann::json::parse(text, text + header_len, nullptr, /*allow_exceptions=*/false);
  KILN_CHECK(!header.is_discarded() && header.is_object(),
             "{}: safetensors header is not a JSON object", path_);
  const uint64_t data_size = size_ - data_offset_;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__" || (skip && skip(name))) continue;
    KILN_CHECK(entry.is_object() && entry.contains("dtype") && entry["dtype"].is_string() &&
                   entry.contains("shape") && entry["shape"].is_array() &&
                   entry.contains("data_offsets") && entry["data_offsets"].is_array() &&
                   entry["data_offsets"].size() == 2,
               "{}: tensor '{}' needs dtype, shape and two data_offsets", path_, name);
    SafetensorsTensorInfo t;
    t.name = name;
    t.dtype = read_dtype(path_, name, entry["dtype"].get<std::string>());
    const auto& dims = entry["shape"];
    KILN_CHECK(dims.size() <= static_cast<size_t>(Shape::kMaxRank),
               "{}: tensor '{}' has rank {} (at most {})", path_, name, dims.size(),
               Shape::kMaxRank);
    uint64_t numel = 1;
    for (const auto& d : dims) {
      KILN_CHECK(d.is_number_unsigned(), "{}: tensor '{}' has a dimension that is not a count",
                 path_, name);
      const uint64_t n = d.get<uint64_t>();
      KILN_CHECK(n == 0 || numel <= data_size / n, "{}: tensor '{}' is larger than the file", path_,
                 name);
      numel *= n;
      t.shape.push_back(static_cast<int64_t>(n));
    }
    const auto& off = entry["data_offsets"];
    KILN_CHECK(off[0].is_number_unsigned() && off[1].is_number_unsigned(),
               "{}: tensor '{}' has data_offsets that are not byte counts", path_, name);
    t.begin = off[0].get<uint64_t>();
    t.end = off[1].get<uint64_t>();
    KILN_CHECK(t.begin <= t.end && t.end <= data_size,
               "{}: tensor '{}' data_offsets [{}, {}] are outside the data section of {} bytes",
               path_, name, t.begin, t.end, data_size);
    const uint64_t expected = dtype_bytes(t.dtype, static_cast<int64_t>(numel));
    KILN_CHECK(t.end - t.begin == expected,
               "{}: tensor '{}' holds {} bytes but shape {} of {} needs {}", path_, name,
               t.end - t.begin, t.shape.str(), dtype_name(t.dtype), expected);
    tensors_.push_back(std::move(t));
  }
  std::sort(tensors_.begin(), tensors_.end(), [](const auto& a, const auto& b) {
    return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
  });
  for (size_t i = 1; i < tensors_.size(); ++i) {
    const auto& prev = tensors_[i - 1];
    const auto& cur = tensors_[i];
    KILN_CHECK(cur.begin >= prev.end || cur.begin == cur.end || prev.begin == prev.end,
               "{}: tensors '{}' and '{}' overlap", path_, prev.name, cur.name);
  }
  for (size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
}

const SafetensorsTensorInfo* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Tensor SafetensorsFile::tensor(std::string_view name) const {
  const SafetensorsTensorInfo* t = find(name);
  KILN_CHECK(t != nullptr, "{}: no tensor '{}'", path_, name);
  auto* bytes = const_cast<uint8_t*>(data_ + data_offset_ + t->begin);
  return Tensor::borrow(t->dtype, t->shape, bytes, keepalive_);
}

}  // namespace kiln::model

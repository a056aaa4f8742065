// Parsing of a GGUF file: header, metadata, tensor infos, and the checks that make every tensor a
// valid, non-overlapping range of the file.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "kiln/base/gguf_tensor_types.h"
#include "kiln/base/mmap_file.h"
#include "kiln/model/gguf.h"
#include "kiln/model/gguf_cursor.h"

namespace kiln::model {
namespace {

constexpr char kMagic[4] = {'G', 'G', 'U', 'F'};
// Real files never nest arrays; the limit keeps a hostile file from exhausting the stack.
constexpr int kMaxArrayDepth = 16;
// Smallest encodings, used to reject counts the rest of the file cannot possibly hold before
// anything is allocated for them.
constexpr uint64_t kMinKeyValueBytes = 8 + 4 + 1;        // key length, value type, a u8
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // name length, n_dims, type, offset

// Bytes one element of this type takes at least.
uint64_t min_encoded_bytes(GgufType type) {
  switch (type) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::Bool:
      return 1;
    case GgufType::U16:
    case GgufType::I16:
      return 2;
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::F32:
      return 4;
    case GgufType::U64:
    case GgufType::I64:
    case GgufType::F64:
    case GgufType::String:  // its u64 length
      return 8;
    case GgufType::Array:  // element type and count
      return 4 + 8;
  }
  return 1;
}

}  // namespace

class GgufParser {
 public:
  GgufParser(GgufFile& file) : file_(file), in_(file.data_, file.size_, file.path_) {}

  void parse() {
    read_header();
    read_metadata();
    index_metadata();
    read_alignment();
    read_tensor_infos();
    index_tensors();
    place_data_section();
    check_tensor_ranges();
  }

 private:
  void read_header() {
    in_.set_context("header");
    in_.need(4, "the magic");
    if (std::memcmp(in_.here(), kMagic, 4) != 0) {
      in_.set_context("");
      in_.fail("not a GGUF file: it starts with '{}' instead of 'GGUF'",
               printable(std::string_view(reinterpret_cast<const char*>(in_.here()), 4)));
    }
    in_.read<uint32_t>("the magic");
    uint32_t version = in_.read<uint32_t>("the version");
    if (version == 1) in_.fail("GGUF version 1 is not supported (kiln reads versions 2 and 3)");
    uint32_t swapped = __builtin_bswap32(version);
    if (swapped == 2 || swapped == 3) {
      in_.fail("big-endian GGUF file (version {}); kiln reads little-endian files only", swapped);
    }
    if (version != 2 && version != 3) {
      in_.fail("unsupported GGUF version {} (kiln reads versions 2 and 3)", version);
    }
    file_.version_ = version;
    n_tensors_ = in_.read<uint64_t>("the tensor count");
    n_kv_ = in_.read<uint64_t>("the metadata key count");
    uint64_t left = in_.remaining();
    if (n_kv_ > left / kMinKeyValueBytes) {
      in_.fail("{} metadata keys cannot fit in the {} bytes after the header", n_kv_, left);
    }
    if (n_tensors_ > left / kMinTensorInfoBytes ||
        n_kv_ * kMinKeyValueBytes + n_tensors_ * kMinTensorInfoBytes > left) {
      in_.fail("{} tensor infos (and {} metadata keys) cannot fit in the {} bytes after the header",
               n_tensors_, n_kv_, left);
    }
  }

  // Vectors of strings, arrays, keys and tensor infos grow as elements are actually read rather
  // than being reserved from a count: a corrupt count then fails on the first missing element
  // instead of first allocating several times the file's size.
  void read_metadata() {
    for (uint64_t i = 0; i < n_kv_; ++i) {
      in_.set_context(fmt::format("metadata key #{}", i));
      std::string key = in_.read_string("the key");
      in_.set_context(fmt::format("metadata key #{} '{}'", i, printable(key)));
      GgufType type = read_type("the value type");
      GgufValue value = read_value(type, 0);
      file_.metadata_.push_back(GgufKeyValue{std::move(key), std::move(value)});
    }
  }

  GgufType read_type(std::string_view what) {
    uint32_t id = in_.read<uint32_t>(what);
    if (id >= kNumGgufTypes) in_.fail("unknown metadata value type {}", id);
    return static_cast<GgufType>(id);
  }

  GgufValue read_value(GgufType type, int depth) {
    switch (type) {
      case GgufType::U8:
        return GgufValue(in_.read<uint8_t>("a u8 value"));
      case GgufType::I8:
        return GgufValue(in_.read<int8_t>("an i8 value"));
      case GgufType::U16:
        return GgufValue(in_.read<uint16_t>("a u16 value"));
      case GgufType::I16:
        return GgufValue(in_.read<int16_t>("an i16 value"));
      case GgufType::U32:
        return GgufValue(in_.read<uint32_t>("a u32 value"));
      case GgufType::I32:
        return GgufValue(in_.read<int32_t>("an i32 value"));
      case GgufType::F32:
        return GgufValue(in_.read<float>("an f32 value"));
      case GgufType::Bool:
        return GgufValue(read_bool());
      case GgufType::String:
        return GgufValue(in_.read_string("a string value"));
      case GgufType::Array:
        return GgufValue(read_array(depth));
      case GgufType::U64:
        return GgufValue(in_.read<uint64_t>("a u64 value"));
      case GgufType::I64:
        return GgufValue(in_.read<int64_t>("an i64 value"));
      case GgufType::F64:
        return GgufValue(in_.read<double>("an f64 value"));
    }
    in_.fail("unknown metadata value type {}", static_cast<uint32_t>(type));
  }

  bool read_bool() {
    uint8_t b = in_.read<uint8_t>("a bool value");
    if (b > 1) in_.fail("bool value at offset {} is {}, neither 0 nor 1", in_.offset() - 1, b);
    return b == 1;
  }

  GgufArray read_array(int depth) {
    if (depth >= kMaxArrayDepth) in_.fail("arrays nested more than {} deep", kMaxArrayDepth);
    GgufType type = read_type("the array element type");
    uint64_t count = in_.read<uint64_t>("the array length");
    if (count > in_.remaining() / min_encoded_bytes(type)) {
      in_.fail("an array of {} {} elements cannot fit in the {} bytes left in the file", count,
               gguf_value_type_name(type), in_.remaining());
    }
    auto n = static_cast<size_t>(count);
    switch (type) {
      case GgufType::U8:
        return GgufArray{read_numbers<uint8_t>(n)};
      case GgufType::I8:
        return GgufArray{read_numbers<int8_t>(n)};
      case GgufType::U16:
        return GgufArray{read_numbers<uint16_t>(n)};
      case GgufType::I16:
        return GgufArray{read_numbers<int16_t>(n)};
      case GgufType::U32:
        return GgufArray{read_numbers<uint32_t>(n)};
      case GgufType::I32:
        return GgufArray{read_numbers<int32_t>(n)};
      case GgufType::F32:
        return GgufArray{read_numbers<float>(n)};
      case GgufType::U64:
        return GgufArray{read_numbers<uint64_t>(n)};
      case GgufType::I64:
        return GgufArray{read_numbers<int64_t>(n)};
      case GgufType::F64:
        return GgufArray{read_numbers<double>(n)};
      case GgufType::Bool: {
        std::vector<bool> v(n);
        for (size_t i = 0; i < n; ++i) v[i] = read_bool();
        return GgufArray{std::move(v)};
      }
      case GgufType::String: {
        std::vector<std::string> v;
        for (size_t i = 0; i < n; ++i) v.push_back(in_.read_string("a string element"));
        return GgufArray{std::move(v)};
      }
      case GgufType::Array: {
        std::vector<GgufArray> v;
        for (size_t i = 0; i < n; ++i) v.push_back(read_array(depth + 1));
        return GgufArray{std::move(v)};
      }
    }
    in_.fail("unknown array element type {}", static_cast<uint32_t>(type));
  }

  template <typename T>
  std::vector<T> read_numbers(size_t n) {
    std::vector<T> v(n);
    in_.read_bytes(v.data(), n * sizeof(T), "the array elements");
    return v;
  }

  // The index holds views into metadata_'s keys, so it is built once the vector is final.
  void index_metadata() {
    in_.set_context("");
    file_.key_index_.reserve(file_.metadata_.size());
    for (size_t i = 0; i < file_.metadata_.size(); ++i) {
      const std::string& key = file_.metadata_[i].key;
      if (!file_.key_index_.emplace(key, i).second) {
        in_.fail("metadata key '{}' appears more than once", printable(key));
      }
    }
  }

  void read_alignment() {
    std::optional<uint32_t> a = file_.try_get_u32("general.alignment");
    if (!a) return;
    if (*a == 0 || (*a & (*a - 1)) != 0) {
      in_.fail("general.alignment is {}; it must be a non-zero power of two", *a);
    }
    file_.alignment_ = *a;
  }

  void read_tensor_infos() {
    for (uint64_t i = 0; i < n_tensors_; ++i) {
      in_.set_context(fmt::format("tensor info #{}", i));
      GgufTensorInfo info;
      info.name = in_.read_string("the tensor name");
      in_.set_context(fmt::format("tensor '{}'", printable(info.name)));
      uint32_t n_dims = in_.read<uint32_t>("the dimension count");
      if (n_dims > static_cast<uint32_t>(Shape::kMaxRank)) {
        in_.fail("{} dimensions; at most {} are supported", n_dims, Shape::kMaxRank);
      }
      uint64_t dims[Shape::kMaxRank] = {};  // fastest-varying first, as stored
      int64_t numel = 1;
      for (uint32_t d = 0; d < n_dims; ++d) {
        dims[d] = in_.read<uint64_t>("a dimension");
        if (dims[d] == 0 || dims[d] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          in_.fail("dimension {} is {}; dimensions must be between 1 and 2^63-1", d,
                   static_cast<int64_t>(dims[d]));
        }
        if (__builtin_mul_overflow(numel, static_cast<int64_t>(dims[d]), &numel)) {
          in_.fail("the element count overflows 64 bits");
        }
      }
      // kiln shapes are row-major: reverse GGUF's fastest-first order.
      for (uint32_t d = n_dims; d-- > 0;) info.shape.push_back(static_cast<int64_t>(dims[d]));
      info.gguf_type = in_.read<uint32_t>("the tensor type");
      info.dtype = dtype_from_gguf(info.gguf_type);
      info.offset = in_.read<uint64_t>("the data offset");
      info.nbytes = byte_size(info, n_dims > 0 ? dims[0] : 1, numel);
      if (info.offset % file_.alignment_ != 0) {
        in_.fail("data offset {} is not a multiple of the alignment {}", info.offset,
                 file_.alignment_);
      }
      file_.tensors_.push_back(std::move(info));
    }
  }

  // Bytes of the tensor's data; 0 for a type id ggml does not know (its size is unknowable, so
  // only its offset can be checked).
  uint64_t byte_size(const GgufTensorInfo& info, uint64_t row_length, int64_t numel) {
    const GgufTensorType* type = find_gguf_tensor_type(info.gguf_type);
    if (type == nullptr) return 0;
    if (row_length % static_cast<uint64_t>(type->block_size) != 0) {
      in_.fail("row length {} is not a multiple of the {} block size {}", row_length, type->name,
               type->block_size);
    }
    uint64_t blocks = static_cast<uint64_t>(numel / type->block_size);
    uint64_t nbytes;
    if (__builtin_mul_overflow(blocks, static_cast<uint64_t>(type->block_bytes), &nbytes)) {
      in_.fail("the byte size overflows 64 bits");
    }
    return nbytes;
  }

  void index_tensors() {
    in_.set_context("");
    file_.tensor_index_.reserve(file_.tensors_.size());
    for (size_t i = 0; i < file_.tensors_.size(); ++i) {
      const std::string& name = file_.tensors_[i].name;
      if (!file_.tensor_index_.emplace(name, i).second) {
        in_.fail("tensor name '{}' appears more than once", printable(name));
      }
    }
  }

  // The data section starts at the first multiple of the alignment after the tensor infos.
  void place_data_section() {
    uint64_t end_of_infos = in_.offset();
    uint64_t a = file_.alignment_;
    file_.data_offset_ = (end_of_infos + a - 1) / a * a;
    if (!file_.tensors_.empty() && file_.data_offset_ > file_.size_) {
      in_.fail(
          "the tensor data section would start at byte {}, past the end of the file ({} bytes)",
          file_.data_offset_, file_.size_);
    }
  }

  void check_tensor_ranges() {
    uint64_t data_size = file_.size_ - std::min<uint64_t>(file_.data_offset_, file_.size_);
    for (const GgufTensorInfo& t : file_.tensors_) {
      if (t.offset > data_size || t.nbytes > data_size - t.offset) {
        in_.fail(
            "tensor '{}' ({} {}, {} bytes at offset {} of the data section) runs past the end of "
            "the file: the data section holds {} bytes",
            printable(t.name), t.type_name(), t.shape.str(), t.nbytes, t.offset, data_size);
      }
    }
    std::vector<size_t> order(file_.tensors_.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return file_.tensors_[a].offset < file_.tensors_[b].offset;
    });
    for (size_t k = 1; k < order.size(); ++k) {
      const GgufTensorInfo& prev = file_.tensors_[order[k - 1]];
      const GgufTensorInfo& next = file_.tensors_[order[k]];
      if (next.offset < prev.offset + prev.nbytes) {
        in_.fail("tensors '{}' (bytes {}..{}) and '{}' (from byte {}) overlap",
                 printable(prev.name), prev.offset, prev.offset + prev.nbytes, printable(next.name),
                 next.offset);
      }
    }
  }

  GgufFile& file_;
  GgufCursor in_;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
};

std::shared_ptr<GgufFile> GgufFile::open(const std::string& path) {
  std::shared_ptr<MmapFile> map = MmapFile::open(path);
  const uint8_t* data = map->data();
  size_t size = map->size();
  return from_bytes(data, size, std::move(map), path);
}

std::shared_ptr<GgufFile> GgufFile::from_bytes(const uint8_t* data, size_t size,
                                               std::shared_ptr<const void> keepalive,
                                               std::string name) {
  auto file = std::shared_ptr<GgufFile>(new GgufFile());
  file->path_ = std::move(name);
  file->keepalive_ = std::move(keepalive);
  file->data_ = data;
  file->size_ = size;
  GgufParser(*file).parse();
  return file;
}

}  // namespace kiln::model

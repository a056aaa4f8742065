// PackedWeight to and from bytes, for the on-disk caches of packed weights
// (model/weight_store.cc, model/packed_weights_file.cc). Layout: magic, n, k, groups, bytes,
// quantized, segment count, the segments (the header), then the packed data. Every field is
// checked against what packing the same segments would produce, so a damaged entry is refused
// instead of read out of bounds.
#include <cstring>

#include "kiln/kernels/packed_weight.h"

namespace kiln::kernels {
namespace {

// v2: segments start at 64-byte-aligned offsets (packed_segment_offset).
constexpr char kMagic[8] = {'K', 'P', 'A', 'C', 'K', 'W', '2', '\n'};

struct Fields {
  int64_t n, k, groups;
  uint64_t bytes;
  uint32_t quantized, n_segments;
};

struct SegmentFields {
  uint32_t dtype;
  int64_t n, col0, groups, group0;
  uint64_t group_bytes, offset;
};

}  // namespace

std::string PackedWeight::serialize() const {
  std::string out = serialize_header();
  out.append(reinterpret_cast<const char*>(data_.get()), bytes_);
  return out;
}

std::string PackedWeight::serialize_header() const {
  std::string out(kMagic, sizeof kMagic);
  const Fields f{
      n_, k_, groups_, bytes_, quantized_ ? 1u : 0u, static_cast<uint32_t>(segs_.size())};
  out.append(reinterpret_cast<const char*>(&f), sizeof f);
  for (const PackedSegment& s : segs_) {
    SegmentFields sf;
    std::memset(&sf, 0, sizeof sf);  // no stray padding bytes in the file
    sf.dtype = static_cast<uint32_t>(s.dtype);
    sf.n = s.n;
    sf.col0 = s.col0;
    sf.groups = s.groups;
    sf.group0 = s.group0;
    sf.group_bytes = s.group_bytes;
    sf.offset = s.offset;
    out.append(reinterpret_cast<const char*>(&sf), sizeof sf);
  }
  return out;
}

std::optional<PackedWeight> PackedWeight::deserialize(std::string_view in,
                                                      const PackedAllocator& alloc) {
  size_t pos = 0;
  std::optional<PackedWeight> p = parse_header(in, pos);
  if (!p || in.size() - pos != p->bytes_) return std::nullopt;
  if (alloc) {
    p->data_ = alloc(p->bytes_);
  } else {
    p->data_ = std::shared_ptr<uint8_t>(static_cast<uint8_t*>(aligned_alloc64(p->bytes_)),
                                        [](uint8_t* q) { aligned_free(q); });
  }
  std::memcpy(p->data_.get(), in.data() + pos, p->bytes_);
  return p;
}

std::optional<PackedWeight> PackedWeight::view_from_header(std::string_view header,
                                                           std::shared_ptr<uint8_t> data,
                                                           size_t available) {
  size_t pos = 0;
  std::optional<PackedWeight> p = parse_header(header, pos);
  if (!p || pos != header.size() || p->bytes_ > available || data == nullptr) return std::nullopt;
  p->data_ = std::move(data);
  return p;
}

std::optional<PackedWeight> PackedWeight::parse_header(std::string_view in, size_t& pos) {
  if (in.size() < sizeof kMagic + sizeof(Fields) ||
      std::memcmp(in.data(), kMagic, sizeof kMagic) != 0)
    return std::nullopt;
  Fields f{};
  std::memcpy(&f, in.data() + sizeof kMagic, sizeof f);
  pos = sizeof kMagic + sizeof f;
  if (f.k <= 0 || f.n <= 0 || f.n_segments == 0 || f.n_segments > 64 ||
      in.size() - pos < f.n_segments * sizeof(SegmentFields))
    return std::nullopt;
  PackedWeight p;
  p.k_ = f.k;
  for (uint32_t i = 0; i < f.n_segments; ++i) {
    SegmentFields sf{};
    std::memcpy(&sf, in.data() + pos, sizeof sf);
    pos += sizeof sf;
    if (sf.dtype >= static_cast<uint32_t>(kNumDTypes) || sf.n <= 0) return std::nullopt;
    PackedSegment s{};
    s.dtype = static_cast<DType>(sf.dtype);
    size_t expected_group_bytes = 0;
    try {
      expected_group_bytes = packed_group_bytes(s.dtype, f.k);
    } catch (const std::exception&) {
      return std::nullopt;
    }
    // The segment must be exactly what packing would have laid out after the previous ones.
    s.n = sf.n;
    s.col0 = p.n_;
    s.groups = (s.n + kGroupRows - 1) / kGroupRows;
    s.group0 = p.groups_;
    s.group_bytes = expected_group_bytes;
    s.offset = packed_segment_offset(p.bytes_);
    if (sf.col0 != s.col0 || sf.groups != s.groups || sf.group0 != s.group0 ||
        sf.group_bytes != s.group_bytes || sf.offset != s.offset)
      return std::nullopt;
    p.n_ += s.n;
    p.groups_ += s.groups;
    p.bytes_ = s.offset + s.group_bytes * static_cast<size_t>(s.groups);
    p.quantized_ = p.quantized_ || !packed_layout(s.dtype).is_float;
    p.segs_.push_back(s);
  }
  if (p.n_ != f.n || p.groups_ != f.groups || p.bytes_ != f.bytes ||
      p.quantized_ != (f.quantized != 0))
    return std::nullopt;
  return p;
}

}  // namespace kiln::kernels

#include "kiln/model/weight_store.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <functional>

#include "kiln/base/cpu_features.h"
#include "kiln/base/error.h"
#include "kiln/base/log.h"
#include "kiln/base/mmap_file.h"
#include "kiln/base/thread_pool.h"
#include "kiln/kernels/dequant.h"
#include "kiln/model/gguf.h"

namespace kiln::model {
namespace {

// The param node's identity: its GGUF name, or for a derived concat the joined names.
std::string param_key(const graph::Node& param) {
  if (param.attrs.has("concat")) {
    std::string key;
    for (const auto& part : param.attrs.get_strs("concat")) key += part + "+";
    return key;
  }
  return param.attrs.get_str("name");
}

// A repacked weight's stored bytes are not read again (the kernels read the packed copy), so
// their mapped file pages leave the resident set: without this a loaded model holds both. A
// tensor also read in place (a tied embedding) faults back in just the rows it touches.
size_t release_source_pages(const std::vector<Tensor>& sources) {
  size_t bytes = 0;
  for (const Tensor& t : sources) bytes += MmapFile::release_pages(t.data(), t.nbytes());
  return bytes;
}

}  // namespace

WeightStore::WeightStore(std::shared_ptr<const TensorSource> source, FusedTensorMap fused)
    : file_(std::move(source)), fused_(std::move(fused)) {}

WeightStore::WeightStore(std::shared_ptr<const GgufFile> file, FusedTensorMap fused)
    : WeightStore(gguf_tensor_source(std::move(file)), std::move(fused)) {}

std::optional<WeightMeta> WeightStore::meta(const std::string& name) const {
  auto slice = fused_.find(name);
  const std::string& stored = slice == fused_.end() ? name : slice->second.source;
  if (!file_->has_tensor(stored)) return std::nullopt;
  const StoredTensorInfo info = file_->tensor_info(stored);
  KILN_CHECK(info.dtype.has_value(), "tensor '{}' has type {}, which kiln does not support", stored,
             info.type_name);
  if (slice == fused_.end()) return WeightMeta{*info.dtype, info.shape};
  const TensorSlice& part = slice->second;
  KILN_CHECK(info.shape.rank() >= 1 && part.end <= info.shape[0],
             "stored tensor '{}' has shape {}, too small for rows [{}, {}) of '{}'", stored,
             info.shape.str(), part.begin, part.end, name);
  Shape shape = info.shape;
  shape[0] = part.end - part.begin;
  if (part.cuts_columns()) {
    KILN_CHECK(info.shape.rank() == 2 && part.col_end <= info.shape[1],
               "stored tensor '{}' has shape {}, too small for columns [{}, {}) of '{}'", stored,
               info.shape.str(), part.col_begin, part.col_end, name);
    shape[1] = part.col_end - part.col_begin;
  }
  return WeightMeta{*info.dtype, shape};
}

Tensor WeightStore::stored_source(const std::string& name) const {
  auto slice = fused_.find(name);
  return file_->tensor(slice == fused_.end() ? name : slice->second.source);
}

Tensor WeightStore::tensor(const std::string& name) const {
  auto slice = fused_.find(name);
  if (slice == fused_.end()) return file_->tensor(name);
  const TensorSlice& part = slice->second;
  Tensor rows = file_->tensor(part.source).slice_rows(part.begin, part.end);
  if (!part.cuts_columns()) return rows;
  // A column range of each row: copied, since the rows' pieces are not contiguous. Quantized
  // rows are whole blocks, so the cut must fall on block boundaries.
  const int block = dtype_info(rows.dtype()).block_size;
  KILN_CHECK(part.col_begin % block == 0 && part.col_end % block == 0,
             "'{}' needs columns [{}, {}) of {} tensor '{}', which do not fall on its {}-value "
             "blocks; this model cannot be split this many ways (--tp)",
             name, part.col_begin, part.col_end, dtype_name(rows.dtype()), part.source, block);
  const int64_t n_rows = rows.shape()[0];
  const size_t row_bytes = dtype_bytes(rows.dtype(), rows.shape()[1]);
  const size_t skip = dtype_bytes(rows.dtype(), part.col_begin);
  const size_t take = dtype_bytes(rows.dtype(), part.col_end - part.col_begin);
  Tensor out = Tensor::empty(rows.dtype(), Shape{n_rows, part.col_end - part.col_begin});
  const auto* src = static_cast<const char*>(rows.data());
  auto* dst = static_cast<char*>(out.data());
  for (int64_t r = 0; r < n_rows; ++r)
    std::memcpy(dst + r * take, src + r * row_bytes + skip, take);
  return out;
}

WeightLookup WeightStore::lookup() const {
  return [this](const std::string& name) { return meta(name); };
}

const Tensor& WeightStore::raw_by_name(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = raw_.find(name);
  if (it != raw_.end()) return it->second;
  Tensor t = tensor(name);
  // Vectors (norm weights, biases) are read by f32 kernels: convert them once.
  if (t.shape().rank() == 1 && t.dtype() != DType::F32) {
    Tensor f = Tensor::empty(DType::F32, t.shape());
    kernels::dequantize_row(t.dtype(), t.data(), f.data_as<float>(), t.numel());
    t = f;
  }
  return raw_.emplace(name, std::move(t)).first->second;
}

const Tensor& WeightStore::raw(const graph::Node& param) {
  KILN_CHECK(!param.attrs.has("concat"), "derived weight {} has no stored form", param_key(param));
  return raw_by_name(param.attrs.get_str("name"));
}

void WeightStore::set_pack_threads(ThreadPool* threads) {
  std::lock_guard<std::mutex> lock(pack_threads_mutex_);
  parallel_ = nullptr;
  if (threads == nullptr || threads->size() < 2) return;
  parallel_ = [threads](int64_t n, const std::function<void(int64_t, int64_t)>& body) {
    threads->run([&](int tid, int nth) {
      Range r = split_range(n, tid, nth);
      if (r.begin < r.end) body(r.begin, r.end);
    });
  };
}

const kernels::PackedWeight& WeightStore::packed_by_key(const graph::Node& param) {
  std::string key = param_key(param);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = packed_.find(key);
    if (it != packed_.end()) return *it->second;
  }
  std::lock_guard<std::mutex> pack_lock(pack_threads_mutex_);
  {  // another thread may have packed it while this one waited
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = packed_.find(key);
    if (it != packed_.end()) return *it->second;
  }
  auto start = std::chrono::steady_clock::now();
  std::unique_ptr<kernels::PackedWeight> packed;
  // Weights are packed in the order the graph reads them: the arena lays them out as one stream.
  auto alloc = [this](size_t bytes) { return arena_.allocate(bytes); };
  std::vector<Tensor> sources;
  if (param.attrs.has("concat")) {
    for (const auto& name : param.attrs.get_strs("concat")) sources.push_back(tensor(name));
    packed = pack_concat_cached(key, sources);
  } else {
    sources.push_back(tensor(key));
    packed = std::make_unique<kernels::PackedWeight>(
        kernels::PackedWeight::pack(sources[0], alloc, parallel_));
    // A column cut was copied: what to release is the stored tensor it was read from.
    if (auto it = fused_.find(key); it != fused_.end() && it->second.cuts_columns())
      sources[0] = stored_source(key);
  }
  const size_t released = release_source_pages(sources);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::lock_guard<std::mutex> lock(mutex_);
  pack_stats_.tensors += 1;
  pack_stats_.bytes += packed->bytes();
  pack_stats_.released_bytes += released;
  pack_stats_.seconds += seconds;
  return *packed_.emplace(key, std::move(packed)).first->second;
}

void WeightStore::set_pack_cache_dir(std::string dir) { pack_cache_dir_ = std::move(dir); }

std::unique_ptr<kernels::PackedWeight> WeightStore::pack_concat_cached(
    const std::string& key, const std::vector<Tensor>& parts) {
  auto alloc = [this](size_t bytes) { return arena_.allocate(bytes); };
  const graph::CompileCache cache(pack_cache_dir_);
  if (!cache.enabled()) {
    return std::make_unique<kernels::PackedWeight>(
        kernels::PackedWeight::pack_concat(parts, alloc, parallel_));
  }
  // Hashing the parts' bytes (tens of MB at several GB/s) is what makes a stale entry
  // impossible: any change to the weights is a different key.
  std::string description = "kiln packed weight v1 | exe " + graph::executable_identity() +
                            " | isa " + isa_name(active_isa()) + " | cpu " + cpu_feature_string() +
                            " | " + key;
  for (const Tensor& t : parts) {
    description += fmt::format(
        " | {} {} {:016x}", dtype_name(t.dtype()), t.shape().str(),
        graph::cache_key(std::string_view(static_cast<const char*>(t.data()), t.nbytes())));
  }
  const uint64_t cache_key = graph::cache_key(description);
  if (auto payload = cache.load(cache_key)) {
    if (auto p = kernels::PackedWeight::deserialize(*payload, alloc)) {
      std::lock_guard<std::mutex> lock(mutex_);
      ++pack_stats_.cache_hits;
      return std::make_unique<kernels::PackedWeight>(std::move(*p));
    }
    KILN_LOG_WARN("pack cache entry for {} does not hold a packed weight; repacking it", key);
  }
  auto packed = std::make_unique<kernels::PackedWeight>(
      kernels::PackedWeight::pack_concat(parts, alloc, parallel_));
  cache.store(cache_key, packed->serialize());
  std::lock_guard<std::mutex> lock(mutex_);
  ++pack_stats_.cache_stores;
  return packed;
}

const kernels::PackedWeight& WeightStore::packed(const graph::Node& param) {
  return packed_by_key(param);
}

const kernels::PackedExperts& WeightStore::packed_experts(
    const std::vector<const graph::Node*>& parts) {
  std::string key = "experts:";
  for (const graph::Node* p : parts) key += param_key(*p) + "+";
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = experts_.find(key);
    if (it != experts_.end()) return *it->second;
  }
  std::lock_guard<std::mutex> pack_lock(pack_threads_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = experts_.find(key);
    if (it != experts_.end()) return *it->second;
  }
  auto start = std::chrono::steady_clock::now();
  std::vector<Tensor> tensors;
  for (const graph::Node* p : parts) tensors.push_back(tensor(p->attrs.get_str("name")));
  auto alloc = [this](size_t bytes) { return arena_.allocate(bytes); };
  auto packed =
      std::make_unique<kernels::PackedExperts>(kernels::pack_experts(tensors, alloc, parallel_));
  const size_t released = release_source_pages(tensors);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::lock_guard<std::mutex> lock(mutex_);
  pack_stats_.tensors += static_cast<int64_t>(parts.size());
  pack_stats_.bytes += packed->bytes();
  pack_stats_.released_bytes += released;
  pack_stats_.seconds += seconds;
  return *experts_.emplace(key, std::move(packed)).first->second;
}

void WeightStore::prepack(const graph::Graph& graph,
                          const std::function<void(int64_t, int64_t)>& progress) {
  // Every weight in the order the graph reads it (the arena lays them out as one stream).
  std::vector<std::function<void()>> packs;
  for (const auto& node : graph.nodes()) {
    auto param = [&](int i) { return &graph.node(node.inputs[i].node); };
    switch (node.op) {
      case graph::Op::Matmul:
      case graph::Op::MatmulAdd:
      case graph::Op::MatmulSplit:
        packs.push_back([this, p = param(1)] { packed(*p); });
        break;
      case graph::Op::NormMatmulArgmax:
        packs.push_back([this, p = param(2)] { packed(*p); });
        break;
      case graph::Op::MoeFfn:
        packs.push_back([this, p = param(1)] { packed(*p); });
        packs.push_back([this, g = param(2), u = param(3)] { packed_experts({g, u}); });
        packs.push_back([this, d = param(4)] { packed_experts({d}); });
        break;
      default:
        break;
    }
  }
  int64_t done = 0;
  for (const auto& pack : packs) {
    pack();
    if (progress) progress(++done, static_cast<int64_t>(packs.size()));
  }
  KILN_LOG_INFO("repacked {} weights: {:.1f} MiB in {:.2f} s", pack_stats_.tensors,
                pack_stats_.bytes / 1048576.0, pack_stats_.seconds);
}

size_t WeightStore::matmul_weight_bytes() const { return pack_stats_.bytes; }

}  // namespace kiln::model

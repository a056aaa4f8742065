#include "kiln/model/weight_store.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <unordered_set>

#include "kiln/base/cache_file.h"
#include "kiln/base/cpu_features.h"
#include "kiln/base/error.h"
#include "kiln/base/log.h"
#include "kiln/base/mmap_file.h"
#include "kiln/base/thread_pool.h"
#include "kiln/graph/passes/pipeline.h"
#include "kiln/kernels/dequant.h"
#include "kiln/model/gguf.h"
#include "kiln/model/packed_weights_file.h"

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

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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
  auto alloc = [this](size_t bytes) { return allocate_packed(bytes); };
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
  if (param.attrs.has("concat")) add_part_views(param, *packed);
  return *packed_.emplace(key, std::move(packed)).first->second;
}

void WeightStore::add_part_views(const graph::Node& param, const kernels::PackedWeight& merged) {
  const auto names = param.attrs.get_strs("concat");
  for (size_t i = 0; i < names.size(); ++i) {
    // A part packed on its own before (a merge prepack did not foresee) keeps that copy: its
    // users may hold references to it.
    if (packed_.count(names[i]) > 0) {
      KILN_LOG_DEBUG("{} is packed twice: on its own and inside {}", names[i], param_key(param));
      continue;
    }
    packed_.emplace(names[i], std::make_unique<kernels::PackedWeight>(merged.segment_view(i, 1)));
    part_views_[names[i]] = true;
  }
}

void WeightStore::set_pack_cache_dir(std::string dir) { pack_cache_dir_ = std::move(dir); }

std::unique_ptr<kernels::PackedWeight> WeightStore::pack_concat_cached(
    const std::string& key, const std::vector<Tensor>& parts) {
  auto alloc = [this](size_t bytes) { return allocate_packed(bytes); };
  const graph::CompileCache cache(prepacking_to_file_ ? "" : pack_cache_dir_);
  if (!cache.enabled()) {
    return std::make_unique<kernels::PackedWeight>(
        kernels::PackedWeight::pack_concat(parts, alloc, parallel_));
  }
  // Hashing the parts' bytes (tens of MB at several GB/s) is what makes a stale entry
  // impossible: any change to the weights is a different key.
  std::string description = "kiln packed weight v2 | exe " + graph::executable_identity() +
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
  auto alloc = [this](size_t bytes) { return allocate_packed(bytes); };
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

namespace {

// Appends, in graph order, every weight `g` reads as a matmul weight that is not in `seen`.
template <typename Job>
void collect_pack_jobs(const graph::Graph& g, std::vector<Job>& jobs,
                       std::unordered_set<std::string>& seen) {
  auto add = [&](std::vector<const graph::Node*> params, bool experts) {
    std::string key = experts ? "experts:" : "";
    for (const graph::Node* p : params) key += param_key(*p) + (experts ? "+" : "");
    if (seen.insert(key).second) jobs.push_back(Job{key, std::move(params), experts});
  };
  for (const auto& node : g.nodes()) {
    auto param = [&](int i) { return &g.node(node.inputs[i].node); };
    switch (node.op) {
      case graph::Op::Matmul:
      case graph::Op::MatmulAdd:
      case graph::Op::MatmulSplit:
        add({param(1)}, false);
        break;
      case graph::Op::NormMatmulArgmax:
        add({param(2)}, false);
        break;
      case graph::Op::MoeFfn:
        add({param(1)}, false);
        add({param(2), param(3)}, true);
        add({param(4)}, true);
        break;
      default:
        break;
    }
  }
}

}  // namespace

void WeightStore::prepack(const graph::Graph& graph,
                          const std::function<void(int64_t, int64_t)>& progress) {
  // The graph as capture will optimize it: its merged weights (QKV, gate/up) are packed once,
  // merged, and their parts become views, so no byte is packed twice. Then whatever only the
  // traced graph reads (normally nothing new: the parts are views by then). Every weight in
  // the order the graph reads it: the arena lays them out as one stream.
  graph::Graph optimized = graph;
  graph::PipelineOptions pipeline;
  pipeline.analyses = false;
  graph::run_pipeline(optimized, pipeline);
  std::vector<PackJob> jobs;
  std::unordered_set<std::string> seen;
  collect_pack_jobs(optimized, jobs, seen);
  collect_pack_jobs(graph, jobs, seen);

  uint64_t file_key = 0;
  const std::string file = weights_file_path(jobs, file_key);
  if (!file.empty() && load_weights_file(file, file_key, jobs)) {
    if (progress) progress(static_cast<int64_t>(jobs.size()), static_cast<int64_t>(jobs.size()));
    KILN_LOG_INFO("mapped {} packed weights ({:.1f} MiB) from {} in {:.2f} s (checksum verified)",
                  pack_stats_.tensors, pack_stats_.bytes / 1048576.0, file,
                  pack_stats_.file_seconds);
    return;
  }
  prepacking_to_file_ = !file.empty();
  if (!file.empty()) {
    // Packed bytes are within a few percent of the stored ones (group padding, alignment).
    size_t bound = 0;
    for (const PackJob& job : jobs)
      for (const graph::Node* p : job.params) {
        const graph::ValueType& t = p->outputs[0];
        bound += dtype_bytes(t.dtype, t.shape.numel()) / 4 * 5 + 4096;
      }
    file_writer_ = PackedWeightsFileWriter::create(file, file_key, bound);
  }
  int64_t done = 0;
  for (const PackJob& job : jobs) {
    if (job.experts) {
      packed_experts(job.params);
    } else {
      packed(*job.params[0]);
    }
    if (progress) progress(++done, static_cast<int64_t>(jobs.size()));
  }
  prepacking_to_file_ = false;
  KILN_LOG_INFO("repacked {} weights: {:.1f} MiB in {:.2f} s", pack_stats_.tensors,
                pack_stats_.bytes / 1048576.0, pack_stats_.seconds);
  if (file_writer_) store_weights_file(jobs);
  file_writer_.reset();  // the weights keep the mapping
}

std::shared_ptr<uint8_t> WeightStore::allocate_packed(size_t bytes) {
  if (file_writer_)
    if (auto piece = file_writer_->allocate(bytes)) return piece;
  return arena_.allocate(bytes);
}

std::string WeightStore::weights_file_path(const std::vector<PackJob>& jobs, uint64_t& key) const {
  if (pack_cache_dir_.empty()) return {};
  const std::string identity = file_->identity();
  if (identity.empty()) return {};
  // Everything the packed bytes depend on: the code (executable), the CPU, the model file
  // (its identity stands for its bytes, which are never read to make the key) and which
  // weights are packed how (names, merges, types and shapes).
  std::string description = "kiln packed weights file v1 | exe " + graph::executable_identity() +
                            " | isa " + isa_name(active_isa()) + " | cpu " + cpu_feature_string() +
                            " | " + identity;
  for (const PackJob& job : jobs) {
    description += " | " + job.key;
    for (const graph::Node* p : job.params) {
      const graph::ValueType& t = p->outputs[0];
      description += fmt::format(" {} {}", dtype_name(t.dtype), t.shape.str());
    }
  }
  key = graph::cache_key(description);
  return fmt::format("{}/{:016x}{}", pack_cache_dir_, key, cache_file::kPackedWeightsExtension);
}

bool WeightStore::load_weights_file(const std::string& path, uint64_t key,
                                    const std::vector<PackJob>& jobs) {
  const auto start = std::chrono::steady_clock::now();
  auto loaded = load_packed_weights_file(path, key);
  if (!loaded) return false;
  std::unordered_map<std::string, kernels::PackedWeight*> by_name;
  for (auto& [name, w] : *loaded) by_name[name] = &w;
  // Installed into these first, then all at once: a file that lacks a weight changes nothing.
  std::unordered_map<std::string, std::unique_ptr<kernels::PackedWeight>> weights;
  std::unordered_map<std::string, std::unique_ptr<kernels::PackedExperts>> experts;
  std::unordered_map<std::string, bool> views;
  size_t bytes = 0;
  int64_t tensors = 0;  // counted as packing counts them
  auto missing = [&](const std::string& what) {
    KILN_LOG_WARN("packed weights cache {} does not match the model ({}); repacking", path, what);
    return false;
  };
  for (const PackJob& job : jobs) {
    if (job.experts) {
      auto e = std::make_unique<kernels::PackedExperts>();
      for (size_t i = 0;; ++i) {
        auto it = by_name.find(fmt::format("{}#{}", job.key, i));
        if (it == by_name.end()) break;
        e->experts.push_back(std::move(*it->second));
      }
      if (e->experts.empty()) return missing(job.key);
      bytes += e->bytes();
      tensors += static_cast<int64_t>(job.params.size());
      experts.emplace(job.key, std::move(e));
      continue;
    }
    if (weights.count(job.key) > 0) continue;  // a part served as a view of a merged weight
    auto it = by_name.find(job.key);
    const Shape& shape = job.params[0]->outputs[0].shape;
    if (it == by_name.end() || shape.rank() != 2 || it->second->n() != shape[0] ||
        it->second->k() != shape[1])
      return missing(job.key);
    auto w = std::make_unique<kernels::PackedWeight>(std::move(*it->second));
    bytes += w->bytes();
    tensors += 1;
    if (job.params[0]->attrs.has("concat")) {
      const auto names = job.params[0]->attrs.get_strs("concat");
      if (w->segments().size() != names.size()) return missing(job.key);
      for (size_t i = 0; i < names.size(); ++i) {
        if (weights.count(names[i]) > 0) continue;
        weights.emplace(names[i], std::make_unique<kernels::PackedWeight>(w->segment_view(i, 1)));
        views[names[i]] = true;
      }
    }
    weights.emplace(job.key, std::move(w));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [k, w] : weights) packed_.try_emplace(k, std::move(w));
  for (auto& [k, e] : experts) experts_.try_emplace(k, std::move(e));
  for (auto& [k, v] : views) part_views_[k] = v;
  pack_stats_.tensors += tensors;
  pack_stats_.bytes += bytes;
  pack_stats_.file_hit = true;
  pack_stats_.file_seconds = seconds_since(start);
  return true;
}

void WeightStore::store_weights_file(const std::vector<PackJob>& jobs) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<NamedPackedWeight> entries;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const PackJob& job : jobs) {
      if (job.experts) {
        const auto& e = experts_.at(job.key)->experts;
        for (size_t i = 0; i < e.size(); ++i)
          entries.emplace_back(fmt::format("{}#{}", job.key, i), &e[i]);
      } else if (part_views_.count(job.key) == 0) {
        entries.emplace_back(job.key, packed_.at(job.key).get());
      }
    }
  }
  if (!file_writer_->finish(entries)) return;
  pack_stats_.file_stored = true;
  pack_stats_.file_seconds = seconds_since(start);
  KILN_LOG_INFO("packed {} weights into {} (finished in {:.2f} s)", entries.size(),
                file_writer_->path(), pack_stats_.file_seconds);
}

size_t WeightStore::matmul_weight_bytes() const { return pack_stats_.bytes; }

}  // namespace kiln::model

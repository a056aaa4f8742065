// The model's weights: tensors borrowed from the mmap'd file (GGUF or Hugging Face, through a
// TensorSource), small tensors (norms,
// biases) converted to f32 once, and matmul weights repacked at load into the kernels' layout
// (kernels/packed_weight.h). Implements graph::WeightProvider, including derived params that
// graph passes create ({concat=[a,b,c]}: merged QKV and gate/up weights), weights a file
// stores fused (fused_tensors.h), served as row ranges of their tensor, and mixture-of-experts
// weights, packed per expert (kernels/packed_experts.h).
//
// Each byte is packed once: prepack() packs the merged form of every group the matmul-merge
// pass will merge, and the separate weights (which eager steps read) are views of its
// segments, so graph mode holds no more packed bytes than eager mode.
#pragma once
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/base/bump_arena.h"
#include "kiln/base/thread_pool.h"
#include "kiln/graph/compile_cache.h"
#include "kiln/graph/weight_provider.h"
#include "kiln/kernels/packed_weight.h"
#include "kiln/model/fused_tensors.h"
#include "kiln/model/tensor_source.h"
#include "kiln/model/transformer.h"

namespace kiln::model {

class PackedWeightsFileWriter;

class GgufFile;

struct PackStats {
  int64_t tensors = 0;
  size_t bytes = 0;           // repacked bytes held in memory
  size_t released_bytes = 0;  // mapped file pages of repacked weights dropped from memory
  double seconds = 0;
  int64_t cache_hits = 0;    // merged weights read from the pack cache
  int64_t cache_stores = 0;  // merged weights packed and written to it
  // The packed-weights file (all weights prepack packs, packed_weights_file.h):
  bool file_hit = false;     // mapped from it instead of packed
  bool file_stored = false;  // packed and written to it
  double file_seconds = 0;   // reading and verifying it, or writing it
};

class WeightStore : public graph::WeightProvider {
 public:
  explicit WeightStore(std::shared_ptr<const TensorSource> source, FusedTensorMap fused = {});
  explicit WeightStore(std::shared_ptr<const GgufFile> file, FusedTensorMap fused = {});

  // Tensor parallelism: these weights are one rank's shard (the map names the slices) and
  // `comm` the group holding the others, which the graph's collectives run on.
  void set_communicator(Communicator* comm) { comm_ = comm; }
  Communicator* communicator() override { return comm_; }

  std::optional<WeightMeta> meta(const std::string& name) const;
  WeightLookup lookup() const;

  // Packs each weight's groups on `threads` from now on (null: on the calling thread). Packing
  // happens at load and capture, on the thread that owns the pool, while it is idle; never call
  // packed() from inside one of its runs.
  void set_pack_threads(ThreadPool* threads);
  // Keeps packed weights in this cache folder, next to the compiled plans, so a fresh process
  // does not repack them. Empty: no cache. Two kinds of entry:
  //  - prepack's weights, all of them in one file memory-mapped on the next start
  //    (packed_weights_file.h), keyed by the executable, the CPU, the model file's identity
  //    (TensorSource::identity: path, size, mtime, inode) and every weight's name, dtype and
  //    shape; a source without an identity does not use it;
  //  - a merged weight packed later (a concat prepack did not foresee), one entry each, keyed
  //    by the executable, the CPU, the weight's name and the bytes of its parts.
  // Both are checksummed; a damaged, truncated or stale entry is never used: it is removed
  // and the weights are packed anew.
  void set_pack_cache_dir(std::string dir);
  // Repacks every tensor used as a matmul weight by `graph` (the traced, unoptimized forward
  // pass) now (load time, with progress), so that capture and the first request do not pay
  // for it, or maps them from the packed-weights file. Groups the pass pipeline merges into
  // one matmul (QKV, gate/up) are packed merged, their parts served as views.
  void prepack(const graph::Graph& graph,
               const std::function<void(int64_t done, int64_t total)>& progress = nullptr);
  const PackStats& pack_stats() const { return pack_stats_; }
  // Bytes of weights one forward pass reads (for bandwidth figures): packed matmul weights
  // plus the embedding rows are negligible, so this sums packed weights.
  size_t matmul_weight_bytes() const;

  const Tensor& raw(const graph::Node& param) override;
  const kernels::PackedWeight& packed(const graph::Node& param) override;
  const kernels::PackedExperts& packed_experts(
      const std::vector<const graph::Node*>& parts) override;

 private:
  const Tensor& raw_by_name(const std::string& name);
  // The stored bytes of a weight the forward pass names (a row range for fused tensors).
  Tensor tensor(const std::string& name) const;
  // The whole stored tensor `name` is served from.
  Tensor stored_source(const std::string& name) const;
  const kernels::PackedWeight& packed_by_key(const graph::Node& param);

  // The packed merged weight from the pack cache, or packed now (and stored there).
  std::unique_ptr<kernels::PackedWeight> pack_concat_cached(const std::string& key,
                                                            const std::vector<Tensor>& parts);
  // One weight prepack packs: a matmul weight (plain or merged) or a layer's experts.
  struct PackJob {
    std::string key;                         // in packed_ or experts_
    std::vector<const graph::Node*> params;  // the param, or the experts' parts
    bool experts = false;
  };
  // Serves each part of a merged weight as a view of its segment (caller holds mutex_).
  void add_part_views(const graph::Node& param, const kernels::PackedWeight& merged);
  // The packed-weights file for these jobs (empty: not used) and its key; then the two
  // directions. Loading installs every weight or none.
  std::string weights_file_path(const std::vector<PackJob>& jobs, uint64_t& key) const;
  bool load_weights_file(const std::string& path, uint64_t key, const std::vector<PackJob>& jobs);
  void store_weights_file(const std::vector<PackJob>& jobs);
  // Room for a packed weight: in the file being written, else in the arena.
  std::shared_ptr<uint8_t> allocate_packed(size_t bytes);

  std::shared_ptr<const TensorSource> file_;
  std::string pack_cache_dir_;
  FusedTensorMap fused_;
  Communicator* comm_ = nullptr;
  std::mutex mutex_;
  std::unordered_map<std::string, Tensor> raw_;
  std::unordered_map<std::string, std::unique_ptr<kernels::PackedWeight>> packed_;
  std::unordered_map<std::string, std::unique_ptr<kernels::PackedExperts>> experts_;
  // Keys of packed_ that are views of a merged weight's segments (not stored on their own).
  std::unordered_map<std::string, bool> part_views_;
  bool prepacking_to_file_ = false;  // merged weights go to the packed-weights file instead
  // While prepack packs a new packed-weights file: where the packed bytes go (its pages).
  std::shared_ptr<PackedWeightsFileWriter> file_writer_;
  BumpArena arena_;                // the packed weights' bytes, in packing order
  kernels::ParallelFor parallel_;  // spreads a weight's groups over the pack threads
  std::mutex pack_threads_mutex_;  // one packing at a time on those threads
  PackStats pack_stats_;
};

}  // namespace kiln::model

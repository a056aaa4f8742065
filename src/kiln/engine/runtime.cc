#include "kiln/engine/runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <thread>

#include "kiln/base/amx.h"
#include "kiln/base/cache_eviction.h"
#include "kiln/base/cpu_features.h"
#include "kiln/base/error.h"
#include "kiln/base/log.h"
#include "kiln/base/resident_memory.h"
#include "kiln/engine/graph_mode/graph_checker.h"
#include "kiln/engine/graph_mode/graph_runner.h"
#include "kiln/engine/model_runner.h"
#include "kiln/engine/tp_step_channel.h"
#include "kiln/graph/compile_cache.h"
#include "kiln/model/fused_tensors.h"
#include "kiln/model/model_config.h"
#include "kiln/model/model_files.h"
#include "kiln/model/tensor_parallel.h"
#include "kiln/model/tokenizer.h"
#include "kiln/model/weight_store.h"

namespace kiln::engine {
GraphMode parse_graph_mode(const std::string& s) {
  if (s == "off") return GraphMode::Off;
  if (s == "replay") return GraphMode::Replay;
  if (s == "optimize") return GraphMode::Optimize;
  fail("unknown graph mode '{}' (expected off, replay or optimize)", s);
}

const char* graph_mode_name(GraphMode m) {
  switch (m) {
    case GraphMode::Off:
      return "off";
    case GraphMode::Replay:
      return "replay";
    case GraphMode::Optimize:
      return "optimize";
  }
  return "?";
}

namespace {

// Every rank must load the same model: compares the shard metadata checksum of every rank
// with rank 0's before any weight is read.
void check_same_model(Communicator& comm, const model::ModelConfig& full,
                      const std::shared_ptr<const model::TensorSource>& source,
                      const model::FusedTensorMap& fused) {
  const model::WeightStore whole(source, fused);
  model::ForwardShape one;  // any shape: only the names of the weights are wanted
  one.kv_pages = 1;
  const graph::Graph g = model::build_forward(full, whole.lookup(), one, "check");
  std::vector<std::string> names;
  for (const graph::Node& n : g.nodes()) {
    if (n.op == graph::Op::Param) names.push_back(n.attrs.get_str("name"));
  }
  const uint64_t mine = model::shard_metadata_checksum(full, *source, names, comm.size());
  std::vector<uint64_t> all(comm.size());
  comm.allgather(&mine, sizeof(mine), all.data());
  for (int r = 1; r < comm.size(); ++r) {
    KILN_CHECK(all[r] == all[0],
               "--tp: rank {} loaded a different model than rank 0 (shard metadata checksum "
               "{:016x} vs {:016x}); every rank must be given the same model file",
               r, all[r], all[0]);
  }
}

}  // namespace

using Progress = std::function<void(const char* stage, int64_t done, int64_t total)>;

struct Runtime::Impl {
  RuntimeOptions options;
  Communicator* tp = nullptr;  // null without tensor parallelism
  ModelInfo info;
  model::ModelConfig config;
  std::unique_ptr<model::Tokenizer> tokenizer;
  std::unique_ptr<model::WeightStore> weights;
  std::unique_ptr<KvPool> pool;
  std::unique_ptr<ThreadPool> owned_threads;  // null when options.shared_threads is used
  ThreadPool* threads = nullptr;
  std::unique_ptr<ModelRunner> runner;
  std::unique_ptr<GraphRunner> graph;
  std::unique_ptr<GraphChecker> checker;
  std::unique_ptr<TpLeaderExecutor> tp_leader;  // rank 0 of a tensor-parallel group
  std::string cache_dir;                        // plans and packed weights; empty: no cache

  // The phases of loading, in order.
  model::ModelFiles open_model();
  void build_pool_and_runner(const ServingGeometry& geometry);
  void prepack_weights(const ServingGeometry& geometry, const Progress& progress);
  void capture_plans(const Progress& progress);
  void describe(const model::ModelFiles& files, const ServingGeometry& geometry);
};

// The config, tokenizer and weights of options.model_path: under --tp, this rank's shard.
model::ModelFiles Runtime::Impl::open_model() {
  KILN_CHECK(!options.model_path.empty(), "no model path given");
  model::ModelFiles files = model::open_model_files(options.model_path, options.quantize);
  config = files.config;
  tokenizer = model::Tokenizer::create(std::move(files.vocab));
  model::FusedTensorMap slices = model::fused_tensor_slices(config);
  if (tp != nullptr) {
    // Agreed first: ranks with different files would otherwise fail (or not) differently.
    check_same_model(*tp, files.config, files.tensors, slices);
    // This rank's shard: a smaller config and its weights as slices of the stored tensors.
    model::TpShard shard =
        model::shard_model(files.config, slices, *files.tensors, tp->rank(), tp->size());
    for (auto& [name, slice] : shard.slices) slices[name] = slice;
    config = shard.config;
    KILN_LOG_INFO(
        "tensor parallel: rank {} of {}: {} heads, {} KV heads, FFN {} of {}, vocab [{}, {})",
        tp->rank(), tp->size(), config.n_heads, config.n_kv_heads, config.n_ff, files.config.n_ff,
        shard.vocab_begin, shard.vocab_end);
  }
  weights = std::make_unique<model::WeightStore>(files.tensors, std::move(slices));
  weights->set_communicator(tp);
  return files;
}

void Runtime::Impl::build_pool_and_runner(const ServingGeometry& geometry) {
  pool = std::make_unique<KvPool>(geometry.kv);
  if (options.shared_threads != nullptr) {
    threads = options.shared_threads;
  } else {
    const int n = options.threads > 0 ? options.threads
                                      : static_cast<int>(std::thread::hardware_concurrency());
    owned_threads = std::make_unique<ThreadPool>(std::max(1, n));
    threads = owned_threads.get();
  }
  runner = std::make_unique<ModelRunner>(config, *weights, *pool, *threads, geometry);
}

// Repacks every matmul weight now, so neither capture nor the first request pays for it; this
// and capture's merged weights are packed on the (still idle) thread pool.
void Runtime::Impl::prepack_weights(const ServingGeometry& geometry, const Progress& progress) {
  weights->set_pack_threads(threads);
  // Packed weights are cached beside the compiled plans (whatever the graph mode: the packed
  // layout does not depend on it), and the option that disables that cache disables both.
  cache_dir = options.compile_cache ? graph::CompileCache::resolve_dir(options.cache_dir) : "";
  // Each rank keeps its own plans and packed weights (its shard's bytes: the same names and
  // shapes as another rank's, other rows, so they must never share an entry).
  if (tp != nullptr && !cache_dir.empty())
    cache_dir += "/tp" + std::to_string(tp->size()) + "-rank" + std::to_string(tp->rank());
  weights->set_pack_cache_dir(cache_dir);
  weights->prepack(runner->trace(geometry.forward_shape()),
                   [&](int64_t done, int64_t total) { progress("repack", done, total); });
}

void Runtime::Impl::capture_plans(const Progress& progress) {
  if (options.graph_mode == GraphMode::Off) {
    KILN_CHECK(!options.check_graph,
               "--check-graph compares graph mode with eager mode; it needs --graph-mode "
               "replay or optimize");
    return;
  }
  GraphRunnerOptions g;
  for (int bs = 1; bs <= options.max_graph_bs; ++bs) g.batch_sizes.push_back(bs);
  g.optimize = options.graph_mode == GraphMode::Optimize;
  g.plan = options.plan;
  g.cache_dir = cache_dir;
  // Speculative decoding's verify steps (greedy, several rows per sequence).
  if (options.verify_max_seqs > 0 && options.verify_max_draft > 0) {
    g.verify_seqs = options.verify_max_seqs;
    g.verify_rows = verify_row_capacities(options.verify_max_seqs, options.verify_max_draft);
  }
  graph = std::make_unique<GraphRunner>(*runner, *weights, *pool, *threads, g);
  graph->capture([&](int64_t done, int64_t total) { progress("capture", done, total); });
  runner->set_plan_replayer(graph.get());
  if (options.check_graph) {
    checker = std::make_unique<GraphChecker>(*runner, *graph, *weights, *pool, *threads, g);
    runner->set_plan_replayer(checker.get());
  }
}

// ModelInfo, and the load's summary and memory in the log.
void Runtime::Impl::describe(const model::ModelFiles& files, const ServingGeometry& geometry) {
  info.path = options.model_path;
  info.architecture = config.arch;
  info.name = files.name;
  info.vocab_size = config.vocab;  // the whole vocabulary, also under --tp
  info.context_length = geometry.context_length;
  info.n_layers = config.n_layers;
  info.n_embd = config.n_embd;
  // Bytes one decode step reads (merged QKV and gate/up are packed once, their parts views).
  info.weight_bytes = weights->matmul_weight_bytes();
  info.chat_template = files.chat_template;
  info.n_params = files.tensors->parameter_count();
  const KvPoolConfig& kv = geometry.kv;
  KILN_LOG_INFO(
      "loaded {} ({}, {} layers, vocab {}), context {}, KV pool {} pages x {} {} ({:.0f} MiB), "
      "{} threads",
      info.name, info.architecture, info.n_layers, info.vocab_size, info.context_length, kv.n_pages,
      kv.page_size, kernels::kv_dtype_name(kv.dtype), pool->bytes() / 1048576.0, threads->size());
  // The memory bound tests/e2e/test_shaped_models.py checks: resident close to the packed
  // weights (the file pages they were packed from are released) plus what the KV pool wrote.
  const ResidentMemory mem = read_resident_memory();
  const model::PackStats& packs = weights->pack_stats();
  KILN_LOG_INFO(
      "memory after load: resident {:.1f} MiB (file {:.1f}, anonymous {:.1f}), peak {:.1f} MiB; "
      "packed weights {:.1f} MiB; file pages released after repacking {:.1f} MiB",
      mem.resident / 1048576.0, mem.file / 1048576.0, mem.anon / 1048576.0, mem.peak / 1048576.0,
      packs.bytes / 1048576.0, packs.released_bytes / 1048576.0);
  KILN_LOG_INFO("matmul kernels: {}, AMX {}, contract {}", isa_name(active_isa()), amx_summary(),
                matmul_contract_summary());
}

Runtime::Runtime(const RuntimeOptions& options) : impl_(std::make_unique<Impl>()) {
  check_matmul_contract_env();  // before minutes of loading, not after
  Impl& m = *impl_;
  m.options = options;
  m.tp = options.tp != nullptr && options.tp->size() > 1 ? options.tp : nullptr;
  // Cache entries used from here on are this run's (eviction keeps them). A second earlier, for
  // file systems whose timestamps are coarser than the clock.
  const auto started = std::filesystem::file_time_type::clock::now() - std::chrono::seconds(1);
  const Progress progress = [&](const char* stage, int64_t done, int64_t total) {
    if (options.progress) options.progress(stage, done, total);
  };
  progress("open", 0, 1);
  const model::ModelFiles files = m.open_model();
  progress("open", 1, 1);
  const ServingGeometry geometry = derive_serving_geometry(
      m.config, {options.kv_tokens, options.context_length, options.page_size, options.kv_dtype});
  m.build_pool_and_runner(geometry);
  m.prepack_weights(geometry, progress);
  m.capture_plans(progress);
  // Rank 0 alone bounds the shared folder (every rank's entries were used after `started`).
  if (!m.cache_dir.empty() && options.cache_max_bytes > 0 && (m.tp == nullptr || m.tp->rank() == 0))
    cache_file::evict_least_recently_used(graph::CompileCache::resolve_dir(options.cache_dir),
                                          options.cache_max_bytes, started);
  if (m.tp != nullptr && m.tp->rank() == 0)
    m.tp_leader = std::make_unique<TpLeaderExecutor>(*m.runner, *m.tp);
  m.describe(files, geometry);
}

Runtime::~Runtime() = default;

const model::Tokenizer& Runtime::tokenizer() const { return *impl_->tokenizer; }
ModelExecutor& Runtime::executor() {
  if (impl_->tp_leader) return *impl_->tp_leader;
  return *impl_->runner;
}

void Runtime::forward_in_mode(const StepBatch& batch, StepOutput& out, StepMode mode) {
  if (impl_->tp_leader) {
    impl_->tp_leader->forward_in_mode(batch, out, mode);
  } else {
    impl_->runner->forward_in_mode(batch, out, mode);
  }
}

int Runtime::tp_rank() const {
  const Communicator* tp = impl_->options.tp;
  return tp != nullptr ? tp->rank() : 0;
}
int Runtime::tp_size() const {
  const Communicator* tp = impl_->options.tp;
  return tp != nullptr ? tp->size() : 1;
}

int64_t Runtime::run_tp_follower() {
  KILN_CHECK(tp_rank() > 0, "run_tp_follower on rank {}", tp_rank());
  return engine::run_tp_follower(*impl_->runner, *impl_->options.tp).steps;
}

std::string Runtime::tp_summary() const {
  return impl_->tp_leader ? impl_->tp_leader->stats().describe() : std::string();
}

void Runtime::tp_shutdown() {
  if (impl_->tp_leader) impl_->tp_leader->shutdown();
}
KvPool& Runtime::kv_pool() { return *impl_->pool; }
const ModelInfo& Runtime::info() const { return impl_->info; }
const RuntimeOptions& Runtime::options() const { return impl_->options; }
GraphRunner* Runtime::graph_runner() { return impl_->graph.get(); }
ModelRunner& Runtime::model_runner() { return *impl_->runner; }
ThreadPool* Runtime::thread_pool() { return impl_->threads; }
model::WeightStore& Runtime::weights() { return *impl_->weights; }
GraphChecker* Runtime::graph_checker() { return impl_->checker.get(); }

}  // namespace kiln::engine

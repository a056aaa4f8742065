// Everything needed to run one model, built from command-line options: the model (a GGUF file
// or a Hugging Face directory, model/model_files.h), the
// tokenizer, weights (repacked), the paged KV pool and the model executor (eager interpreter
// or graph runner). `kiln run`, `kiln serve` and `kiln bench` all start from a Runtime.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "kiln/base/communicator.h"
#include "kiln/base/thread_pool.h"
#include "kiln/engine/kv_pool.h"
#include "kiln/engine/step_batch.h"
#include "kiln/graph/plan.h"

namespace kiln::model {
class Tokenizer;
class WeightStore;
}  // namespace kiln::model

namespace kiln::engine {

enum class GraphMode { Off, Replay, Optimize };
GraphMode parse_graph_mode(const std::string& s);  // "off" | "replay" | "optimize"
const char* graph_mode_name(GraphMode m);

struct RuntimeOptions {
  // A GGUF file or a Hugging Face directory (required; the CLI supplies its default model).
  std::string model_path;
  std::string quantize;  // "q8_0" | "q4_0": quantize an HF directory's matrices at load
  int threads = 0;       // 0: all cores
  // Run on this pool (not owned; it must outlive the runtime) instead of one of its own: a
  // draft model shares the target's threads, so one pool's idle spinning never takes a core
  // from the other's work. `threads` is then ignored.
  ThreadPool* shared_threads = nullptr;
  GraphMode graph_mode = GraphMode::Optimize;
  int max_graph_bs = 32;
  // Verify plans for speculative decoding: steps of up to verify_max_seqs sequences with up to
  // verify_max_draft proposals each (0: none; steps beyond them run eagerly).
  int verify_max_seqs = 0;
  int verify_max_draft = 0;
  int page_size = 16;
  // KV pool capacity in tokens; 0: the bytes of 65536 f16 tokens, so a q8 cache holds about
  // twice as many tokens in the same memory.
  int64_t kv_tokens = 0;
  int context_length = 0;     // 0: the model's, capped by kv_tokens
  std::string cache_dir;      // compile + packed-weight cache; empty: $KILN_CACHE_DIR or XDG
  bool compile_cache = true;  // false: capture and pack cold, never read or write the caches
  // After loading, least recently used cache entries are removed until the folder holds at most
  // this many bytes (this run's entries are always kept; base/cache_eviction.h). 0: no bound.
  uint64_t cache_max_bytes = uint64_t{8} << 30;
  bool check_graph = false;  // run decode steps through a GraphChecker (graph_mode/graph_checker.h)
  graph::PlanOptions plan;   // barriers per level, worker groups
  // Element type of the KV cache: f16, or q8 (int8 blocks with scales; kernels/kv_cache.h).
  kernels::KvDtype kv_dtype = kernels::KvDtype::F16;
  // Tensor parallelism (docs/tensor-parallel.md): the group this process is one rank of
  // (not owned). Null or a group of one: the whole model in this process. Otherwise this
  // rank loads only its shard, rank 0's executor() broadcasts every step and the other ranks
  // call run_tp_follower() instead of running an engine.
  Communicator* tp = nullptr;
  // Called with (stage, done, total) while loading and capturing (progress bars).
  std::function<void(const char* stage, int64_t done, int64_t total)> progress;
};

struct ModelInfo {
  std::string path;
  std::string architecture;
  std::string name;  // general.name, or the file name
  int64_t n_params = 0;
  int64_t vocab_size = 0;
  int64_t context_length = 0;
  int n_layers = 0;
  int n_embd = 0;
  size_t weight_bytes = 0;    // bytes read per decode step for weights
  std::string chat_template;  // the GGUF's tokenizer.chat_template or the HF directory's, if any
};

class GraphChecker;
class GraphRunner;
class ModelRunner;

class Runtime {
 public:
  explicit Runtime(const RuntimeOptions& options);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const model::Tokenizer& tokenizer() const;
  ModelExecutor& executor();
  // One step in a forced mode (StepMode, step_batch.h), on every rank under --tp: rank 0
  // broadcasts it with its mode. For tools that compare modes (`kiln bench`); a graph-mode step
  // needs a graph runner set on model_runner() that captured the batch's size.
  void forward_in_mode(const StepBatch& batch, StepOutput& out, StepMode mode);
  KvPool& kv_pool();
  const ModelInfo& info() const;
  const RuntimeOptions& options() const;
  GraphRunner* graph_runner();  // null with --graph-mode off
  ModelRunner& model_runner();
  ThreadPool* thread_pool();
  model::WeightStore& weights();  // for tools that build extra plans (kiln bench)
  GraphChecker* graph_checker();  // null unless options.check_graph

  // Tensor parallelism: this rank's index and the group size (0 and 1 without --tp).
  int tp_rank() const;
  int tp_size() const;
  // A follower rank (tp_rank() > 0) runs the steps rank 0 broadcasts until it says stop.
  int64_t run_tp_follower();  // returns the steps it ran
  // Rank 0: tells the followers to stop (also done when the Runtime is destroyed).
  void tp_shutdown();
  // Rank 0 under --tp: its steps and the collectives inside them ("" otherwise).
  std::string tp_summary() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::engine

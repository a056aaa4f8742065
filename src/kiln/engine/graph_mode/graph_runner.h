// Graph mode for decode: one captured Plan per batch size (and per output kind: greedy ids
// or logits), all sharing ONE arena sized to the largest. A decode batch is padded to the
// smallest captured size that fits; padded rows are inert (token_seq -1: attention writes
// zeros; slot -1: no KV write; seq_len 0) and outputs are sliced back to the live rows.
// Only the live rows of the per-step inputs are copied into the plan's static buffers; params
// and the KV pool (state) are never copied.
//
// Verify plans (speculative decoding, docs/speculative-decoding.md) run steps in which a
// sequence may have several rows (its last token and the proposals after it, causal inside
// the sequence) and every row returns its greedy token, or its logits (logits plans, for
// sampled requests). They have a fixed number of sequence slots and one plan per output kind
// and row capacity; a step takes the smallest capacity that holds its rows,
// and padded rows and sequence slots are inert as above. They are made like the decode plans:
// one optimized template (traced at kTemplateBatch rows), rebatched to every capacity.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/base/thread_pool.h"
#include "kiln/engine/kv_pool.h"
#include "kiln/engine/model_runner.h"
#include "kiln/engine/plan_replayer.h"
#include "kiln/engine/step_batch.h"
#include "kiln/graph/compile_cache.h"
#include "kiln/graph/plan.h"

namespace kiln::engine {

struct GraphRunnerOptions {
  std::vector<int> batch_sizes;  // captured sizes, ascending
  bool optimize = true;          // run the pass pipeline (graph-mode optimize) or not (replay)
  graph::PlanOptions plan;
  std::string cache_dir;     // empty: no compile cache
  bool logits_plans = true;  // also capture logits-producing plans (for sampling)
  // Verify plans: up to verify_seqs sequences, one plan per row capacity in verify_rows.
  // 0 / empty: none.
  int verify_seqs = 0;
  std::vector<int> verify_rows;
};

// The row capacities worth capturing for verify steps of up to `seqs` sequences with up to
// `max_draft` proposals each: every count up to one sequence's largest step (a batch-1 step
// pays for each padded row), then steps of that size up to the largest batch's rows.
std::vector<int> verify_row_capacities(int seqs, int max_draft);

struct CaptureStats {
  double seconds = 0;
  bool cache_hit = false;
  int plans = 0;
  size_t arena_bytes = 0;     // the shared arena
  size_t max_plan_bytes = 0;  // largest single plan's peak
  size_t sum_plan_bytes = 0;  // what separate arenas would cost
  size_t scratch_bytes = 0;   // shared kernel scratch
  size_t output_bytes = 0;    // shared output buffers (the largest plan's)
  std::string pass_report;    // per-pass statistics of the first plan
  // Where the seconds went (cold: trace, passes, planning; warm: reading the cache entry).
  double trace_seconds = 0;
  double pass_seconds = 0;
  double prepare_seconds = 0;  // memory planning and static buffers
  double cache_seconds = 0;    // key, entry load/parse or print/store
  double pack_seconds = 0;     // packing merged weights on first use (once per process)
  double bind_seconds = 0;     // lowering every plan against the arena
  int rebatched_plans = 0;     // cold: plans made by rebatching an optimized template
};

class GraphRunner : public PlanReplayer {
 public:
  GraphRunner(ModelRunner& runner, model::WeightStore& weights, KvPool& pool, ThreadPool& threads,
              GraphRunnerOptions options);
  ~GraphRunner();

  // Traces, optimizes, plans and binds every plan (or loads them from the compile cache).
  void capture(const std::function<void(int64_t done, int64_t total)>& progress = nullptr);
  const CaptureStats& capture_stats() const { return stats_; }

  // A pure decode batch no larger than the largest captured size, of a captured kind; or a
  // batch that returns every row's token or logits, in row order, that fits a verify plan.
  bool can_run(const StepBatch& batch) const { return plan_for_batch(batch) != nullptr; }
  // Replays the plan that fits `batch`; throws kiln::Error when none does.
  void run(const StepBatch& batch, StepOutput& out);
  bool try_run(const StepBatch& batch, StepOutput& out) override;
  // run() with every kernel skipped (graph::Plan::replay_host_only): what graph mode costs on
  // the host per step, for `kiln bench`. Counted in host_only_replays(), not in replays().
  void run_host_only(const StepBatch& batch);
  int64_t host_only_replays() const { return host_only_replays_; }
  // The first half of run(): picks the plan for `batch` and copies its live rows into the
  // plan's input buffers, without replaying (--check-graph executes it step by step).
  graph::Plan& stage(const StepBatch& batch);

  // The plan that would run a decode batch of `bs` sequences (for tools and tests).
  graph::Plan* plan_for(int bs, bool greedy) const;
  // The verify plan that would run `seqs` sequences with `rows` rows in all, returning greedy
  // ids or logits (null: none).
  graph::Plan* verify_plan_for(int seqs, int rows, bool greedy) const;
  int64_t verify_replays() const { return verify_replays_; }
  int64_t replays() const { return replays_; }

 private:
  // One plan to capture: its sequence slots, rows (a decode plan has one per sequence) and
  // output kind.
  struct PlanKind {
    int bs;
    int tokens;
    bool greedy;
    bool verify;
  };
  struct Entry {
    PlanKind kind;
    std::unique_ptr<graph::Plan> plan;
  };
  struct Templates;
  class PhaseClock;
  using CaptureProgress = std::function<void(int64_t done, int64_t total)>;
  // capture()'s phases, in order.
  std::vector<PlanKind> plan_kinds() const;
  // Warm start: the plans of a compile cache entry, prepared. False (plans_ left empty, the
  // reason logged against `entry_path`) when the entry cannot give every plan.
  bool load_plans(const std::string& payload, const std::vector<PlanKind>& kinds,
                  const std::string& entry_path, CaptureStats& phases, PhaseClock& clock,
                  const CaptureProgress& progress);
  // Cold start: traces, optimizes and prepares every plan; returns the cache entry that lets
  // load_plans rebuild them.
  std::string build_plans(const std::vector<PlanKind>& kinds, CaptureStats& phases,
                          PhaseClock& clock, const CaptureProgress& progress);
  // Allocates the shared arena, outputs and scratch and lowers every plan against them.
  void bind_plans();
  void log_capture() const;
  std::string cache_description() const;
  void pack_matmul_weights();
  model::ForwardShape plan_shape(int64_t seqs, int64_t tokens, bool greedy) const;
  // The kind's template: traced where the plan has its rows at kTemplateBatch.
  model::ForwardShape template_shape(const PlanKind& kind) const;
  // The graph a plan of `kind` executes: optimized (or not) and analysed, ready to prepare.
  // `rebatched`: whether it was made from the kind's template (else by the full pipeline).
  graph::Graph plan_graph(const PlanKind& kind, Templates& templates, CaptureStats& phases,
                          PhaseClock& clock, bool* rebatched) const;
  // The plan for a batch that can_run() accepts.
  graph::Plan* plan_for_batch(const StepBatch& batch) const;
  void stage_inputs(const StepBatch& batch, graph::Plan& plan);
  void stage_plan(const StepBatch& batch, graph::Plan& plan);  // checks the pool, then inputs
  // The second half of run(): replays a staged plan and copies its output rows to `out`.
  void replay(const StepBatch& batch, graph::Plan& plan, StepOutput& out);

  ModelRunner& runner_;
  model::WeightStore& weights_;
  KvPool& pool_;
  ThreadPool& threads_;
  GraphRunnerOptions options_;
  std::vector<Entry> plans_;
  void* arena_ = nullptr;
  void* scratch_ = nullptr;  // kernel scratch shared by all plans, like the arena
  // The plans' outputs (run() copies them out right after each replay) and the kernel objects
  // every replay refreshes, shared by all plans like the arena.
  void* outputs_ = nullptr;
  std::unique_ptr<graph::SharedLowering> shared_lowering_;
  CaptureStats stats_;
  int64_t replays_ = 0;
  int64_t verify_replays_ = 0;
  int64_t host_only_replays_ = 0;
};

}  // namespace kiln::engine

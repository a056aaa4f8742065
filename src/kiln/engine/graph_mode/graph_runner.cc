#include "kiln/engine/graph_mode/graph_runner.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "kiln/base/amx.h"
#include "kiln/base/cpu_features.h"
#include "kiln/base/error.h"
#include "kiln/base/log.h"
#include "kiln/graph/parser.h"
#include "kiln/graph/passes/pipeline.h"
#include "kiln/graph/printer.h"
#include "kiln/graph/rebatch.h"

namespace kiln::engine {
namespace {

using Json = nlohmann::json;
namespace in = model::input_names;

Json memory_to_json(const graph::MemoryPlan& m) {
  Json buffers = Json::array();
  for (const auto& b : m.buffers)
    buffers.push_back({b.value.node, b.value.index, b.offset, b.size, b.first, b.last, b.slot});
  return {{"arena_bytes", m.arena_bytes},
          {"planned_bytes", m.planned_bytes},
          {"alignment", m.alignment},
          {"buffers", buffers},
          {"index", m.index}};
}

graph::MemoryPlan memory_from_json(const Json& j) {
  graph::MemoryPlan m;
  m.arena_bytes = j.at("arena_bytes").get<size_t>();
  m.planned_bytes = j.at("planned_bytes").get<size_t>();
  m.alignment = j.at("alignment").get<size_t>();
  for (const auto& b : j.at("buffers")) {
    graph::PlannedBuffer p;
    p.value = {b.at(0).get<int32_t>(), b.at(1).get<int32_t>()};
    p.offset = b.at(2).get<size_t>();
    p.size = b.at(3).get<size_t>();
    p.first = b.at(4).get<int>();
    p.last = b.at(5).get<int>();
    p.slot = b.at(6).get<int>();
    m.buffers.push_back(p);
  }
  m.index = j.at("index").get<std::vector<std::vector<int>>>();
  return m;
}

std::string pipeline_description() {
  std::string d;
  for (const auto& p : graph::pipeline_passes())
    d += std::string(p.name) + (p.rewrites ? "," : "(analysis),");
  return d;
}

template <typename T>
void copy_rows(const std::vector<T>& src, Tensor& dst, int64_t live, int64_t padded, T pad) {
  T* d = dst.data_as<T>();
  std::memcpy(d, src.data(), sizeof(T) * live);
  std::fill(d + live, d + padded, pad);
}

// Template kinds: decode logits, decode greedy, verify greedy, verify logits; their names in
// cache entries.
constexpr int kTemplateKinds = 4;
constexpr const char* kTemplateNames[kTemplateKinds] = {"logits", "greedy", "verify",
                                                        "verify_logits"};

}  // namespace

std::vector<int> verify_row_capacities(int seqs, int max_draft) {
  std::vector<int> rows;
  if (seqs < 1 || max_draft < 1) return rows;
  const int per_seq = max_draft + 1;
  for (int r = 2; r <= per_seq; ++r) rows.push_back(r);
  for (int r = 2 * per_seq; r < seqs * per_seq; r += per_seq) rows.push_back(r);
  if (seqs > 1) rows.push_back(seqs * per_seq);
  return rows;
}

// Seconds since the previous lap (capture reports where its time goes).
class GraphRunner::PhaseClock {
 public:
  double lap() {
    const auto now = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    return s;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

// The optimized template of each plan kind (decode logits, decode greedy, verify), made on
// first use.
struct GraphRunner::Templates {
  struct Kind {
    std::optional<graph::Graph> traced;     // at kTemplateBatch
    std::optional<graph::Graph> optimized;  // after the rewriting passes, before the analyses
    std::vector<graph::PassStats> pass_stats;
  };
  Kind kinds[kTemplateKinds];
  static int index(const PlanKind& k) {
    if (k.verify) return k.greedy ? 2 : 3;
    return k.greedy ? 1 : 0;
  }
  std::string pass_report;  // of the first plan
  bool reported_fallback = false;
};

GraphRunner::GraphRunner(ModelRunner& runner, model::WeightStore& weights, KvPool& pool,
                         ThreadPool& threads, GraphRunnerOptions options)
    : runner_(runner),
      weights_(weights),
      pool_(pool),
      threads_(threads),
      options_(std::move(options)) {
  std::sort(options_.batch_sizes.begin(), options_.batch_sizes.end());
  options_.batch_sizes.erase(std::unique(options_.batch_sizes.begin(), options_.batch_sizes.end()),
                             options_.batch_sizes.end());
  KILN_CHECK(!options_.batch_sizes.empty() && options_.batch_sizes.front() >= 1,
             "no batch sizes to capture");
  std::sort(options_.verify_rows.begin(), options_.verify_rows.end());
  options_.verify_rows.erase(std::unique(options_.verify_rows.begin(), options_.verify_rows.end()),
                             options_.verify_rows.end());
  if (options_.verify_seqs < 1) options_.verify_rows.clear();
  KILN_CHECK(options_.verify_rows.empty() || options_.verify_rows.front() >= 2,
             "a verify plan needs room for at least 2 rows");
}

GraphRunner::~GraphRunner() {
  plans_.clear();  // they point into the buffers below
  aligned_free(arena_);
  aligned_free(scratch_);
  aligned_free(outputs_);
}

// Everything a captured plan depends on. Weights' values are not in it (plans hold no
// weight data), but their names, dtypes and shapes are.
std::string GraphRunner::cache_description() const {
  // The executable stands for the code of the passes and the lowering: a rebuilt kiln never
  // reuses plans an older build optimized.
  const std::string build = graph::executable_identity();
  std::string d = fmt::format(
      "kiln {} build {} | passes {} | optimize {} | levels {} | isa {} | cpu {} | threads {} | ",
      KILN_VERSION, build, pipeline_description(), options_.optimize, options_.plan.level_barriers,
      matmul_tier_name(), cpu_feature_string(), threads_.size());
  graph::KvGeometry kv = runner_.kv_geometry();
  d += fmt::format("kv {}x{}x{}x{}x{} {} ctxpages {} | bs", kv.n_layers, kv.n_pages, kv.page_size,
                   kv.n_kv_heads, kv.head_dim, kernels::kv_dtype_name(kv.dtype),
                   runner_.max_pages_per_seq());
  for (int bs : options_.batch_sizes) d += fmt::format(" {}", bs);
  d += fmt::format(" | logits {} | ", options_.logits_plans);
  if (!options_.verify_rows.empty()) {
    d += fmt::format("verify {} seqs, rows", options_.verify_seqs);
    for (int r : options_.verify_rows) d += fmt::format(" {}", r);
    d += " | ";
  }
  d += "model ";
  // The traced graph of the smallest batch names every weight with its dtype and shape and
  // every architectural constant as an attribute: a complete description of the model.
  d += graph::print(runner_.trace(runner_.geometry().forward_shape()));
  return d;
}

model::ForwardShape GraphRunner::plan_shape(int64_t seqs, int64_t tokens, bool greedy) const {
  return runner_.geometry().forward_shape(seqs, tokens, greedy);
}

model::ForwardShape GraphRunner::template_shape(const PlanKind& kind) const {
  // A decode plan's sequences grow with its rows; a verify plan's sequence slots are fixed.
  return plan_shape(kind.verify ? kind.bs : graph::kTemplateBatch, graph::kTemplateBatch,
                    kind.greedy);
}

graph::Graph GraphRunner::plan_graph(const PlanKind& kind, Templates& templates,
                                     CaptureStats& phases, PhaseClock& clock,
                                     bool* rebatched) const {
  *rebatched = false;
  const int bs = kind.tokens;  // what the template's rows become
  graph::Graph traced = runner_.trace(plan_shape(kind.bs, kind.tokens, kind.greedy));
  phases.trace_seconds += clock.lap();
  graph::PipelineOptions analyses_only;
  analyses_only.rewrites = false;
  if (!options_.optimize) {  // replay: only the in-place analysis (the graph as traced)
    graph::run_pipeline(traced, analyses_only);
    phases.pass_seconds += clock.lap();
    return traced;
  }
  // optimize: the template of this kind, optimized once, rebatched to bs.
  Templates::Kind& t = templates.kinds[Templates::index(kind)];
  if (!t.traced) {
    t.traced = runner_.trace(template_shape(kind));
    phases.trace_seconds += clock.lap();
    t.optimized = *t.traced;
    graph::PipelineOptions rewrites_only;
    rewrites_only.analyses = false;
    t.pass_stats = graph::run_pipeline(*t.optimized, rewrites_only);
    phases.pass_seconds += clock.lap();
  }
  // The trace must depend on the batch only through the rebatch rule (same nodes, attributes
  // and every batch-carrying size): then the optimized template rebatched is what the
  // pipeline makes of this trace.
  std::string why;
  auto retraced = graph::rebatch(*t.traced, graph::kTemplateBatch, bs, &why);
  std::optional<graph::Graph> g;
  if (retraced && graph::structurally_equal(*retraced, traced, &why))
    g = graph::rebatch(*t.optimized, graph::kTemplateBatch, bs, &why);
  if (g) {
    auto stats = graph::run_pipeline(*g, analyses_only);
    if (templates.pass_report.empty()) {
      stats.insert(stats.begin(), t.pass_stats.begin(), t.pass_stats.end());
      templates.pass_report = graph::format_pass_stats(stats);
    }
    ++phases.rebatched_plans;
    *rebatched = true;
  } else {
    // Correct but slow (the pipeline per plan): say so once, where it is seen.
    if (!templates.reported_fallback) {
      KILN_LOG_INFO(
          "{} rows ({}): the optimized template does not carry over ({}); running the pass "
          "pipeline for each such plan",
          bs, kTemplateNames[Templates::index(kind)], why);
      templates.reported_fallback = true;
    }
    g = std::move(traced);
    auto stats = graph::run_pipeline(*g);
    if (templates.pass_report.empty()) templates.pass_report = graph::format_pass_stats(stats);
  }
  phases.pass_seconds += clock.lap();
  return std::move(*g);
}

// Packs every matmul weight the plans read that is not packed yet (in practice the merged
// QKV and gate/up weights the passes created), before lowering and timed apart from it. One
// thread, in the order the plan reads them: WeightStore lays packed weights out in packing
// order as one stream, which parallel packing would shuffle.
void GraphRunner::pack_matmul_weights() {
  for (const auto& e : plans_) {
    // The largest plan of each kind.
    const bool largest = e.kind.verify ? e.kind.tokens == options_.verify_rows.back()
                                       : e.kind.bs == options_.batch_sizes.back();
    if (!largest) continue;
    const graph::Graph& g = e.plan->graph();
    for (const graph::Node& n : g.nodes()) {
      int slot = -1;
      if (n.op == graph::Op::Matmul || n.op == graph::Op::MatmulAdd ||
          n.op == graph::Op::MatmulSplit)
        slot = 1;
      if (n.op == graph::Op::NormMatmulArgmax) slot = 2;
      if (slot >= 0) weights_.packed(g.node(n.inputs[slot].node));
      if (n.op == graph::Op::MoeFfn) {  // the router, then the experts
        weights_.packed(g.node(n.inputs[1].node));
        weights_.packed_experts({&g.node(n.inputs[2].node), &g.node(n.inputs[3].node)});
        weights_.packed_experts({&g.node(n.inputs[4].node)});
      }
    }
  }
}

void GraphRunner::capture(const std::function<void(int64_t, int64_t)>& progress) {
  auto start = std::chrono::steady_clock::now();
  PhaseClock clock;
  CaptureStats phases;
  graph::CompileCache cache(options_.cache_dir);
  const uint64_t key = graph::cache_key(cache_description());
  phases.cache_seconds += clock.lap();
  plans_.clear();
  const std::vector<PlanKind> kinds = plan_kinds();

  bool loaded = false;
  if (auto payload = cache.load(key))
    loaded = load_plans(*payload, kinds, cache.path_for(key), phases, clock, progress);
  if (!loaded) {
    const std::string payload = build_plans(kinds, phases, clock, progress);
    cache.store(key, payload);
    phases.cache_seconds += clock.lap();
  }

  // Merged (QKV, gate/up) weights exist only in optimized graphs, so load-time repacking did
  // not see them: pack them now, once, before lowering and timed apart from it.
  pack_matmul_weights();
  const double pack_seconds = clock.lap();

  std::string pass_report = std::move(stats_.pass_report);
  stats_ = CaptureStats{};
  stats_.cache_hit = loaded;
  stats_.plans = static_cast<int>(plans_.size());
  stats_.pass_report = std::move(pass_report);
  stats_.rebatched_plans = phases.rebatched_plans;
  bind_plans();
  stats_.bind_seconds = clock.lap();
  stats_.pack_seconds = pack_seconds;
  stats_.trace_seconds = phases.trace_seconds;
  stats_.pass_seconds = phases.pass_seconds;
  stats_.prepare_seconds = phases.prepare_seconds;
  stats_.cache_seconds = phases.cache_seconds;
  stats_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log_capture();
}

std::vector<GraphRunner::PlanKind> GraphRunner::plan_kinds() const {
  std::vector<PlanKind> kinds;
  for (int bs : options_.batch_sizes) {
    kinds.push_back({bs, bs, true, false});
    if (options_.logits_plans) kinds.push_back({bs, bs, false, false});
  }
  for (int rows : options_.verify_rows) {
    kinds.push_back({options_.verify_seqs, rows, true, true});
    if (options_.logits_plans) kinds.push_back({options_.verify_seqs, rows, false, true});
  }
  return kinds;
}

bool GraphRunner::load_plans(const std::string& payload, const std::vector<PlanKind>& kinds,
                             const std::string& entry_path, CaptureStats& phases, PhaseClock& clock,
                             const CaptureProgress& progress) {
  const auto total = static_cast<int64_t>(kinds.size());
  bool loaded = false;
  try {
    Json j = Json::parse(payload);
    // Plans made from a template are stored as the template (parsed once) and rebuilt by
    // the same deterministic rebatch + analyses the cold capture ran: parsing 64 graphs
    // costs more than rebatching them.
    std::optional<graph::Graph> templates[kTemplateKinds];
    for (const auto& e : j.at("plans")) {
      graph::MemoryPlan mem = memory_from_json(e.at("memory"));
      const PlanKind kind{e.at("bs").get<int>(), e.at("tokens").get<int>(),
                          e.at("greedy").get<bool>(), e.at("verify").get<bool>()};
      std::optional<graph::Graph> g;
      if (e.contains("ir")) {
        g = graph::parse(e.at("ir").get<std::string>());
      } else {
        const int index = Templates::index(kind);
        std::optional<graph::Graph>& t = templates[index];
        if (!t) t = graph::parse(j.at("templates").at(kTemplateNames[index]).get<std::string>());
        std::string why;
        g = graph::rebatch(*t, graph::kTemplateBatch, kind.tokens, &why);
        KILN_CHECK(g.has_value(), "the stored template does not rebatch to {}: {}", kind.tokens,
                   why);
        graph::PipelineOptions analyses_only;
        analyses_only.rewrites = false;
        graph::run_pipeline(*g, analyses_only);
      }
      phases.cache_seconds += clock.lap();
      plans_.push_back({kind, graph::Plan::prepare(std::move(*g), options_.plan, mem)});
      phases.prepare_seconds += clock.lap();
      if (progress) progress(static_cast<int64_t>(plans_.size()), total);
    }
    stats_.pass_report = j.value("pass_report", "");
    loaded = static_cast<int64_t>(plans_.size()) == total;
  } catch (const std::exception& e) {
    KILN_LOG_WARN("compile cache entry {} is unusable ({}); rebuilding it", entry_path, e.what());
  }
  if (!loaded) plans_.clear();
  return loaded;
}

std::string GraphRunner::build_plans(const std::vector<PlanKind>& kinds, CaptureStats& phases,
                                     PhaseClock& clock, const CaptureProgress& progress) {
  const auto total = static_cast<int64_t>(kinds.size());
  Json j;
  j["plans"] = Json::array();
  Templates templates;
  for (const PlanKind& kind : kinds) {
    bool rebatched = false;
    graph::Graph g = plan_graph(kind, templates, phases, clock, &rebatched);
    auto plan = graph::Plan::prepare(std::move(g), options_.plan);
    phases.prepare_seconds += clock.lap();
    Json e = {{"bs", kind.bs},
              {"tokens", kind.tokens},
              {"greedy", kind.greedy},
              {"verify", kind.verify},
              {"memory", memory_to_json(plan->memory())}};
    if (!rebatched) e["ir"] = graph::print(plan->graph());
    j["plans"].push_back(std::move(e));
    phases.cache_seconds += clock.lap();
    plans_.push_back({kind, std::move(plan)});
    if (progress) progress(static_cast<int64_t>(plans_.size()), total);
  }
  stats_.pass_report = templates.pass_report;
  j["pass_report"] = stats_.pass_report;
  j["templates"] = Json::object();
  for (int index = 0; index < kTemplateKinds; ++index) {
    const auto& t = templates.kinds[index].optimized;
    if (t) j["templates"][kTemplateNames[index]] = graph::print(*t);
  }
  return j.dump();
}

// One arena, one output region, one scratch buffer and one set of shared kernel objects for
// all plans: only one plan runs at a time.
void GraphRunner::bind_plans() {
  for (const auto& e : plans_) {
    stats_.max_plan_bytes = std::max(stats_.max_plan_bytes, e.plan->arena_bytes());
    stats_.sum_plan_bytes += e.plan->arena_bytes();
  }
  aligned_free(arena_);
  arena_ = aligned_alloc64(std::max<size_t>(stats_.max_plan_bytes, 64));
  stats_.arena_bytes = stats_.max_plan_bytes;
  size_t output_bytes = 64;
  for (const auto& e : plans_) output_bytes = std::max(output_bytes, e.plan->output_bytes());
  aligned_free(outputs_);
  outputs_ = aligned_alloc64(output_bytes);
  stats_.output_bytes = output_bytes;
  int max_tokens = options_.batch_sizes.back();
  if (!options_.verify_rows.empty()) max_tokens = std::max(max_tokens, options_.verify_rows.back());
  shared_lowering_ = std::make_unique<graph::SharedLowering>(max_tokens);
  graph::PlanSharing sharing;
  sharing.outputs = outputs_;
  sharing.lowering = shared_lowering_.get();
  size_t scratch = 64;
  for (auto& e : plans_) {
    e.plan->bind(arena_, weights_, runner_.kv_geometry(), pool_.data(), threads_.size(), sharing);
    scratch = std::max(scratch, e.plan->scratch_bytes());
  }
  aligned_free(scratch_);
  scratch_ = aligned_alloc64(scratch);
  for (auto& e : plans_) e.plan->set_scratch(scratch_);
  stats_.scratch_bytes = scratch;
}

void GraphRunner::log_capture() const {
  KILN_LOG_INFO(
      "captured {} plans in {:.3f} s ({}), shared arena {:.1f} MiB (separate arenas would be "
      "{:.1f} MiB), scratch {:.1f} MiB, outputs {:.1f} MiB",
      stats_.plans, stats_.seconds, stats_.cache_hit ? "compile cache hit" : "cold",
      stats_.arena_bytes / 1048576.0, stats_.sum_plan_bytes / 1048576.0,
      stats_.scratch_bytes / 1048576.0, stats_.output_bytes / 1048576.0);
  KILN_LOG_DEBUG(
      "capture seconds: trace {:.3f}, passes {:.3f} ({} of {} plans rebatched from a template), "
      "prepare {:.3f}, cache {:.3f}, packing merged weights {:.3f}, bind {:.3f}",
      stats_.trace_seconds, stats_.pass_seconds, stats_.rebatched_plans, stats_.plans,
      stats_.prepare_seconds, stats_.cache_seconds, stats_.pack_seconds, stats_.bind_seconds);
}

graph::Plan* GraphRunner::plan_for(int bs, bool greedy) const {
  for (const auto& e : plans_) {
    if (!e.kind.verify && e.kind.bs >= bs && e.kind.greedy == greedy) return e.plan.get();
  }
  return nullptr;
}

graph::Plan* GraphRunner::verify_plan_for(int seqs, int rows, bool greedy) const {
  if (seqs > options_.verify_seqs) return nullptr;
  for (const auto& e : plans_) {
    if (e.kind.verify && e.kind.greedy == greedy && e.kind.tokens >= rows) return e.plan.get();
  }
  return nullptr;
}

graph::Plan* GraphRunner::plan_for_batch(const StepBatch& batch) const {
  // Plans return every row (decode: one per sequence; verify: each sequence's rows in order).
  if (!batch.returns_every_row()) return nullptr;
  const auto seqs = static_cast<int>(batch.num_seqs());
  if (batch.is_decode()) return plan_for(seqs, batch.greedy_only);
  return verify_plan_for(seqs, static_cast<int>(batch.num_tokens()), batch.greedy_only);
}

void GraphRunner::stage_inputs(const StepBatch& b, graph::Plan& plan) {
  const int64_t rows = b.num_tokens();
  const int64_t padded_rows = plan.input(in::kTokenIds).type.shape[0];
  copy_rows(b.token_ids, plan.input(in::kTokenIds).tensor, rows, padded_rows, 0);
  copy_rows(b.positions, plan.input(in::kPositions).tensor, rows, padded_rows, 0);
  // Padded rows are inert: no sequence (attention writes zeros), no KV write.
  copy_rows(b.token_seq, plan.input(in::kTokenSeq).tensor, rows, padded_rows, -1);
  copy_rows(b.slots, plan.input(in::kSlots).tensor, rows, padded_rows, -1);
  const int64_t live = b.num_seqs();
  Tensor& lens_tensor = plan.input(in::kSeqLens).tensor;
  int32_t* lens = lens_tensor.data_as<int32_t>();
  Tensor& table = plan.input(in::kBlockTable).tensor;
  const int64_t width = table.shape()[1];
  int32_t* table_rows = table.data_as<int32_t>();
  for (int64_t s = 0; s < live; ++s) {
    const auto& seq = b.seqs[s];
    lens[s] = seq.seq_len;
    // Only the pages in use: entries past seq_len are never read, so stale ones are inert.
    std::memcpy(table_rows + s * width, seq.pages.data(), sizeof(int32_t) * seq.pages.size());
  }
  std::fill(lens + live, lens + lens_tensor.shape()[0], 0);
}

graph::Plan& GraphRunner::stage(const StepBatch& batch) {
  graph::Plan* plan = plan_for_batch(batch);
  if (plan == nullptr) {
    throw Error(fmt::format("no captured plan for a step of {} rows over {} sequences",
                            batch.num_tokens(), batch.num_seqs()));
  }
  stage_plan(batch, *plan);
  return *plan;
}

void GraphRunner::stage_plan(const StepBatch& batch, graph::Plan& plan) {
  plan.check_state(pool_.data());
  stage_inputs(batch, plan);
}

void GraphRunner::run_host_only(const StepBatch& batch) {
  stage(batch).replay_host_only(threads_);
  ++host_only_replays_;
}

void GraphRunner::run(const StepBatch& batch, StepOutput& out) { replay(batch, stage(batch), out); }

bool GraphRunner::try_run(const StepBatch& batch, StepOutput& out) {
  graph::Plan* plan = plan_for_batch(batch);
  if (plan == nullptr) return false;
  stage_plan(batch, *plan);
  replay(batch, *plan, out);
  return true;
}

void GraphRunner::replay(const StepBatch& batch, graph::Plan& plan, StepOutput& out) {
  const int64_t rows = batch.num_tokens();  // one output row each (decode or verify)
  plan.replay(threads_);
  ++replays_;
  if (!batch.is_decode()) ++verify_replays_;
  const Tensor& r = plan.output(0);
  out.vocab = runner_.vocab_size();
  out.used_graph = true;
  if (batch.greedy_only) {
    out.greedy_ids.assign(r.data_as<int32_t>(), r.data_as<int32_t>() + rows);
    out.logits.clear();
  } else {
    out.logits.assign(r.data_as<float>(), r.data_as<float>() + rows * out.vocab);
    out.greedy_ids.clear();
  }
}

}  // namespace kiln::engine

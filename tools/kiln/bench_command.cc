// `kiln bench`: offline throughput of one model, eager vs graph mode side by side in ONE
// process (like SGLang's bench_one_batch, batches fed straight to the model runner). For each
// batch size: prefill of every prompt (in chunks of --prefill-chunk tokens, as the scheduler
// would: one eager step over 32 x 128 tokens keeps gigabytes of activations alive), then a timed
// greedy decode loop in eager mode (ModelRunner::forward_eager) and in graph mode (the captured
// plans) on the same Runtime, so both use the same weights, KV pool and threads. Plus: cold and
// warm capture of all plans, the shared arena vs the sum of per-plan peaks, barriers per step, the
// split of a decode step into kernel time and host overhead (kernel_profile.h), the batch-1
// fraction of memory bandwidth, and with --breakdown the gain split into removed per-step work,
// fewer barriers and fusions. `kiln bench serving` (the online benchmark) hangs off this command.
//
// Under tensor parallelism (`mpirun -np N kiln bench --tp N`, docs/tensor-parallel.md) rank 0
// runs the benchmark and every forward step goes through Runtime::forward_in_mode, which
// broadcasts it with its mode (eager or graph) so that the followers run the same step on
// their shards; the followers capture the same plans as rank 0 and only follow. What rank 0
// would do alone with collectives in it (the per-kernel profile, --breakdown's own plans) is
// skipped or refused; what runs no collective (bandwidth probe, host-only replays) runs on
// rank 0 alone.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench_batches.h"
#include "bench_paired.h"
#include "bench_results.h"
#include "bench_rounds.h"
#include "commands.h"
#include "default_model.h"
#include "kernel_profile.h"
#include "kiln/base/amx.h"
#include "kiln/base/cpu_features.h"
#include "kiln/base/error.h"
#include "kiln/base/log.h"
#include "kiln/engine/graph_mode/graph_runner.h"
#include "kiln/engine/model_runner.h"
#include "kiln/engine/runtime.h"
#include "kiln/kernels/kv_cache.h"
#include "kiln/model/transformer.h"
#include "kiln/model/weight_store.h"
#include "memory_bandwidth.h"
#include "progress_bar.h"
#include "tp_group.h"

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;
using clock = std::chrono::steady_clock;

struct BenchArgs {
  std::string model;
  std::string quantize;          // --quantize
  std::string kv_dtype = "f16";  // --kv-dtype
  std::vector<int> batch_sizes{1, 8, 32};
  int input_len = 128;
  int output_len = 64;
  int threads = 0;
  TpArgs tp;             // --tp, --tp-timeout
  int max_graph_bs = 0;  // 0: capture only the benchmarked sizes; N: every size 1..N (serving)
  std::vector<std::string> modes{"eager", "graph"};
  std::string json_path;
  std::string plot_path;
  bool breakdown = false;
  int breakdown_bs = 0;  // 0: the first batch size
  int repeats = 5;
  int rounds = 0;                   // --rounds: interleaved eager/graph repeats of the decode loop
  bool paired_steps = false;        // --paired-steps: a decode loop running each step in both modes
  int host_only_steps = 2000;       // --host-only-steps: no-op replays timed per graph batch size
  bool op_profile = false;          // print each profiled step's kernel time per op kind
  int prefill_chunk = 512;          // the engine's default chunked_prefill_size
  double bandwidth_gbs = 0;         // 0: measure
  bool no_bandwidth_probe = false;  // no bandwidth figure at batch 1 (and no 1 GiB probe buffer)
  uint64_t seed = 1;
  std::string log_level = "warn";
};

std::vector<double> load_average() {
  std::ifstream f("/proc/loadavg");
  double a = 0, b = 0, c = 0;
  if (f >> a >> b >> c) return {a, b, c};
  return {};
}

double seconds_since(clock::time_point t0) {
  return std::chrono::duration<double>(clock::now() - t0).count();
}

// The smallest of `repeats` timings of fn (the least disturbed by other work on the machine).
template <typename F>
double best_seconds(int repeats, F&& fn) {
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = clock::now();
    fn();
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

// Resident set size of this process (0 when /proc is unavailable).
int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  if (!(statm >> pages >> resident)) return 0;
  return resident * ::sysconf(_SC_PAGESIZE);
}

// A temporary compile-cache folder, removed with this object.
struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "kiln-bench-XXXXXX").string();
    KILN_CHECK(::mkdtemp(tmpl.data()) != nullptr, "cannot create a temporary folder under {}",
               fs::temp_directory_path().string());
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

class Bench {
 public:
  Bench(const BenchArgs& a, engine::Runtime& rt, engine::GraphRunner* graph)
      : a_(a),
        rt_(rt),
        runner_(rt.model_runner()),
        graph_(graph),
        // The kernel profile runs each kernel as its own dispatch outside a step; under --tp its
        // collectives would wait for ranks that are not profiling. Not measured there.
        profile_kernels_(rt.tp_size() == 1) {}

  // Prefill, then the timed decode loops and the probes of each mode.
  BatchFigures run_batch(int bs, bool eager, bool graph) {
    BatchFigures b;
    b.bs = bs;
    BenchSequences seqs(rt_.kv_pool(), bs, a_.input_len, a_.output_len, rt_.info().vocab_size,
                        a_.seed + bs);
    const std::vector<int32_t> first = prefill(seqs, &b.prefill_seconds, &b.prefill_chunks);
    b.prefill_tok_s = static_cast<double>(bs) * a_.input_len / b.prefill_seconds;

    if (eager) decode(seqs, first, false, b.eager);
    if (graph) decode(seqs, first, true, b.graph);
    if (eager && graph) b.tokens_match = b.eager.tokens == b.graph.tokens;
    return b;
  }

  // One interleaved round at one batch size: prefill, then the timed decode loop in both modes
  // (which goes first alternates between rounds), no probes.
  RoundFigures run_round(int round, int bs, bool graph_first) {
    RoundFigures r;
    r.round = round;
    r.bs = bs;
    r.graph_first = graph_first;
    BenchSequences seqs(rt_.kv_pool(), bs, a_.input_len, a_.output_len, rt_.info().vocab_size,
                        a_.seed + bs);
    const std::vector<int32_t> first = prefill(seqs, nullptr, nullptr);
    ModeFigures e, g;
    for (bool graph : {graph_first, !graph_first}) timed_decode(seqs, first, graph, graph ? g : e);
    const double threads = static_cast<double>(rt_.thread_pool()->size());
    auto sample = [&](const ModeFigures& m) {
      DecodeSample s;
      s.tok_s = m.decode_tok_s;
      s.wall_step_ms = 1e3 * m.decode_seconds / a_.output_len;
      s.cpu_step_ms = 1e3 * m.decode_cpu_seconds / a_.output_len;
      s.utilisation = m.decode_cpu_seconds / (m.decode_seconds * threads);
      return s;
    };
    r.eager = sample(e);
    r.graph = sample(g);
    r.tokens_match = e.tokens == g.tokens;
    return r;
  }

  // One decode loop of output_len steps in which every step runs in both modes, back to back
  // on the same inputs, the order alternating from step to step (bench_paired.h). The second
  // run of a pair rewrites the KV slot the first wrote, with the same values (graph == eager).
  PairedFigures run_paired(int bs) {
    PairedFigures p;
    p.bs = bs;
    BenchSequences seqs(rt_.kv_pool(), bs, a_.input_len, a_.output_len, rt_.info().vocab_size,
                        a_.seed + bs);
    std::vector<int32_t> tokens = prefill(seqs, nullptr, nullptr);
    p.tokens.assign(bs, {});
    engine::StepOutput out;
    for (bool graph : {false, true})  // first-touch of each mode's buffers, untimed
      forward(seqs.decode(a_.input_len, tokens), graph, out);
    for (int i = 0; i < a_.output_len; ++i) {
      const engine::StepBatch batch = seqs.decode(a_.input_len + i, tokens);
      std::vector<int32_t> next[2];
      double ms[2] = {0, 0};
      const bool graph_first = i % 2 == 1;
      for (bool graph : {graph_first, !graph_first}) {
        auto t0 = clock::now();
        forward(batch, graph, out);
        ms[graph] = 1e3 * seconds_since(t0);
        next[graph] = out.greedy_ids;
      }
      p.eager_ms.push_back(ms[0]);
      p.graph_ms.push_back(ms[1]);
      p.tokens_match = p.tokens_match && next[0] == next[1];
      tokens = next[1];
      for (int s = 0; s < bs; ++s) p.tokens[s].push_back(tokens[s]);
    }
    return p;
  }

  // The --breakdown ladder at one batch size: eager, then plans that add one thing at a time.
  std::vector<BreakdownRow> breakdown(int bs) {
    BenchSequences seqs(rt_.kv_pool(), bs, a_.input_len, a_.output_len, rt_.info().vocab_size,
                        a_.seed + 1000);
    engine::StepOutput out;
    const engine::StepBatch probe = seqs.decode(probe_position(), prefill(seqs, nullptr, nullptr));
    std::vector<BreakdownRow> rows;
    {
      BreakdownRow r{"eager", "interpreter: trace, lower and dispatch every op, every step"};
      r.step_ms = 1e3 * best_seconds(a_.repeats, [&] { runner_.forward_eager(probe, out); });
      fill_kernels(r, runner_.trace(runner_.shape_of(probe)), probe);
      r.barriers = r.kernels;
      rows.push_back(r);
    }
    struct Config {
      const char* name;
      const char* description;
      bool optimize, levels;
    };
    for (const Config& c :
         {Config{"replay, op barriers", "plan of the graph as traced, a barrier after every step",
                 false, false},
          Config{"replay, level barriers", "same plan, one barrier per dependency level", false,
                 true},
          Config{"optimize, op barriers", "passes (fusions), a barrier after every step", true,
                 false},
          Config{"optimize, level barriers", "passes and level barriers: graph mode as shipped",
                 true, true}}) {
      engine::GraphRunnerOptions go;
      go.batch_sizes = {bs};
      go.optimize = c.optimize;
      go.plan.level_barriers = c.levels;
      go.logits_plans = false;
      engine::GraphRunner gr(runner_, rt_.weights(), rt_.kv_pool(), *rt_.thread_pool(), go);
      gr.capture();
      BreakdownRow r{c.name, c.description};
      r.step_ms = 1e3 * best_seconds(a_.repeats, [&] { gr.run(probe, out); });
      graph::Plan* plan = gr.plan_for(bs, true);
      fill_kernels(r, plan->graph(), probe);
      r.barriers = plan->stats().barriers;
      rows.push_back(r);
    }
    return rows;
  }

  // Mid-sequence: attention over a typical length, not the first or last step's.
  int probe_position() const { return a_.input_len + a_.output_len / 2; }

 private:
  // Prefills every prompt (eager, chunked like the scheduler) and returns each sequence's
  // first generated token.
  std::vector<int32_t> prefill(const BenchSequences& seqs, double* seconds, int* chunks) {
    std::vector<int32_t> first(seqs.size(), -1);
    engine::StepOutput out;
    auto t0 = clock::now();
    auto parts = seqs.prefill(a_.prefill_chunk);
    for (const auto& c : parts) {
      rt_.forward_in_mode(c.batch, out, engine::StepMode::Eager);
      for (size_t i = 0; i < c.seqs.size(); ++i) {
        if (c.finishes[i]) first[c.seqs[i]] = out.greedy_ids.at(i);
      }
    }
    if (seconds) *seconds = seconds_since(t0);
    if (chunks) *chunks = static_cast<int>(parts.size());
    return first;
  }

  template <typename Row>
  void fill_kernels(Row& r, const graph::Graph& g, const engine::StepBatch& batch,
                    const char* what = nullptr) {
    engine::ModelRunner::BoundInputs bound;
    runner_.bind(batch, runner_.shape_of(batch), bound);
    KernelProfile p = profile_kernels(g, bound.bindings, *rt_.thread_pool(), rt_.weights(),
                                      runner_.kv_geometry(), a_.repeats);
    if (a_.op_profile && what != nullptr) {
      std::printf("kernel time by op, %s, batch %d (%.3f ms in %d kernels):\n%s\n", what,
                  static_cast<int>(batch.num_seqs()), 1e3 * p.kernel_seconds, p.kernels,
                  format_op_profile(p).c_str());
    }
    r.kernel_ms = 1e3 * p.kernel_seconds;
    r.overhead_ms = r.step_ms - r.kernel_ms;
    r.kernels = p.kernels;
    r.kernels_profiled = true;
  }

  // On every rank under --tp (Runtime::forward_in_mode broadcasts the step and its mode).
  void forward(const engine::StepBatch& batch, bool graph, engine::StepOutput& out) {
    rt_.forward_in_mode(batch, out, graph ? engine::StepMode::Graph : engine::StepMode::Eager);
    KILN_CHECK(out.used_graph == graph, "{} mode ran a decode batch of {} in the other mode",
               graph ? "graph" : "eager", batch.num_seqs());
  }

  // The timed greedy decode loop of output_len steps: wall and process CPU time, the tokens.
  // Returns the last step's tokens.
  std::vector<int32_t> timed_decode(const BenchSequences& seqs, const std::vector<int32_t>& first,
                                    bool graph, ModeFigures& m) {
    const int bs = seqs.size();
    engine::StepOutput out;
    // One untimed step first (first-touch of buffers); the timed loop then rewrites the same
    // KV slot with the same values.
    forward(seqs.decode(a_.input_len, first), graph, out);
    std::vector<int32_t> tokens = first;
    m.tokens.assign(bs, {});
    const double cpu0 = process_cpu_seconds();
    auto t0 = clock::now();
    for (int i = 0; i < a_.output_len; ++i) {
      forward(seqs.decode(a_.input_len + i, tokens), graph, out);
      tokens = out.greedy_ids;
      for (int s = 0; s < bs; ++s) m.tokens[s].push_back(tokens[s]);
    }
    m.decode_seconds = seconds_since(t0);
    m.decode_cpu_seconds = process_cpu_seconds() - cpu0;
    m.decode_tok_s = static_cast<double>(bs) * a_.output_len / m.decode_seconds;
    m.ran = true;
    return tokens;
  }

  // Graph mode's host overhead alone: the probe step replayed --host-only-steps times with
  // every kernel skipped; the mean per replay.
  void time_host_only(const engine::StepBatch& probe, ModeFigures& m) {
    if (a_.host_only_steps <= 0) return;
    const int64_t before = graph_->host_only_replays();
    graph_->run_host_only(probe);  // warm
    auto t0 = clock::now();
    for (int i = 0; i < a_.host_only_steps; ++i) graph_->run_host_only(probe);
    m.host_only_us = 1e6 * seconds_since(t0) / a_.host_only_steps;
    m.host_only_replays = graph_->host_only_replays() - before - 1;
  }

  void decode(const BenchSequences& seqs, const std::vector<int32_t>& first, bool graph,
              ModeFigures& m) {
    const int bs = seqs.size();
    engine::StepOutput out;
    const std::vector<int32_t> tokens = timed_decode(seqs, first, graph, m);

    // The probe: one step repeated, timed whole, then its kernels alone.
    const engine::StepBatch probe = seqs.decode(probe_position(), tokens);
    m.step_ms = 1e3 * best_seconds(a_.repeats, [&] { forward(probe, graph, out); });
    if (graph) {
      time_host_only(probe, m);
      graph::Plan* plan = graph_->plan_for(bs, true);
      m.barriers = plan->stats().barriers;
      m.barriers_unfused = plan->stats().barriers_unfused;
      // A plan padded past the live rows runs a larger graph than the batch binds; profile
      // only exact sizes (every size up to --max-graph-bs is captured, so this is the rule).
      if (profile_kernels_ && plan->input(model::input_names::kTokenIds).type.shape[0] == bs)
        fill_kernels(m, plan->graph(), probe, "graph");
    } else {
      const graph::Graph traced = runner_.trace(runner_.shape_of(probe));
      if (profile_kernels_) fill_kernels(m, traced, probe, "eager");
      // One dispatch and barrier per op (counted from the graph, profiled or not).
      m.barriers = 0;
      for (const graph::Node& n : traced.nodes())
        if (!n.is_source() && !graph::output_is_view(n)) ++m.barriers;
    }
  }

  const BenchArgs& a_;
  engine::Runtime& rt_;
  engine::ModelRunner& runner_;
  engine::GraphRunner* graph_;
  bool profile_kernels_;
};

// Which modes --modes asks for.
struct Modes {
  bool eager = false, graph = false;
};

Modes parse_modes(const BenchArgs& a) {
  Modes m;
  for (const auto& name : a.modes) {
    KILN_CHECK(name == "eager" || name == "graph", "unknown mode '{}' (expected eager, graph)",
               name);
    m.eager = m.eager || name == "eager";
    m.graph = m.graph || name == "graph";
  }
  return m;
}

int breakdown_batch(const BenchArgs& a) {
  return a.breakdown_bs > 0 ? a.breakdown_bs : a.batch_sizes.front();
}

// Checked before anything loads (minutes on a real model), not after the benchmark.
void check_args(const BenchArgs& a, const Modes& modes) {
  KILN_CHECK(!a.batch_sizes.empty(), "no batch sizes");
  for (int bs : a.batch_sizes) KILN_CHECK(bs >= 1, "batch size {} must be at least 1", bs);
  KILN_CHECK(a.rounds == 0 || (modes.eager && modes.graph),
             "--rounds compares eager and graph mode: keep both in --modes");
  KILN_CHECK(!a.paired_steps || (modes.eager && modes.graph),
             "--paired-steps compares eager and graph mode: keep both in --modes");
  if (a.tp.tp > 1) {
    // Both profile or build plans outside the forward steps rank 0 broadcasts: their
    // collectives would have no partner on the other ranks.
    KILN_CHECK(!a.op_profile,
               "--op-profile is not available with --tp: the kernel profile runs each kernel, "
               "collectives included, outside a forward step, where the other ranks do not "
               "follow");
    KILN_CHECK(!a.breakdown,
               "--breakdown is not available with --tp: its ladder of extra plans runs outside "
               "the forward steps the other ranks follow");
  }
}

// The same on every rank: under --tp the followers' KV pools must match rank 0's, whose slots
// the broadcast batches name.
engine::RuntimeOptions runtime_options(const BenchArgs& a, Communicator* group) {
  engine::RuntimeOptions opts;
  opts.model_path = model_or_default(a.model);
  opts.quantize = a.quantize;
  opts.kv_dtype = kernels::parse_kv_dtype(a.kv_dtype);
  opts.threads = a.threads;
  opts.tp = group;
  // Graph mode is set up below, with the plans this run needs, into a fresh compile cache so
  // that both a cold and a warm capture are measured.
  opts.graph_mode = engine::GraphMode::Off;
  // The KV pool holds what the largest batch needs (batches run one after another and free
  // their pages), not the serving default, so memory stays small; the context is the bench's
  // sequence length.
  const int max_bs = *std::max_element(a.batch_sizes.begin(), a.batch_sizes.end());
  const int64_t seq_tokens = a.input_len + a.output_len;
  const int page = opts.page_size;
  const int64_t seq_pages = (seq_tokens + page - 1) / page;
  opts.kv_tokens = (std::max(max_bs, a.breakdown ? breakdown_batch(a) : 1) + 1) * seq_pages * page;
  opts.context_length = static_cast<int>(seq_pages * page);
  return opts;
}

// Plans: the benchmarked batch sizes (or every size 1..--max-graph-bs), greedy and logits
// kinds, graph-mode optimize, as Runtime would capture them. Every rank captures these, in
// this order.
engine::GraphRunnerOptions plan_options(const BenchArgs& a, const std::string& cache_dir) {
  engine::GraphRunnerOptions go;
  if (a.max_graph_bs > 0) {
    for (int bs = 1; bs <= a.max_graph_bs; ++bs) go.batch_sizes.push_back(bs);
  } else {
    go.batch_sizes = a.batch_sizes;
  }
  go.optimize = true;
  go.cache_dir = cache_dir;
  return go;
}

// A follower rank under --tp: the same plans as rank 0, captured the same way (cold, then warm
// from its own fresh cache), then every step rank 0 broadcasts until it says stop.
int follow_bench(const BenchArgs& a, const Modes& modes, engine::Runtime& rt) {
  TempDir cache;
  std::unique_ptr<engine::GraphRunner> gr;
  if (modes.graph) {
    gr = std::make_unique<engine::GraphRunner>(rt.model_runner(), rt.weights(), rt.kv_pool(),
                                               *rt.thread_pool(), plan_options(a, cache.path));
    gr->capture();
    gr->capture();
    rt.model_runner().set_plan_replayer(gr.get());
  }
  rt.run_tp_follower();
  return 0;
}

int bench_on_rank(const BenchArgs& a, const Modes& modes, Communicator* group) {
  const bool leader = group == nullptr || group->rank() == 0;
  ProgressBar bar;
  engine::RuntimeOptions opts = runtime_options(a, group);
  if (leader) {
    opts.progress = [&](const char* stage, int64_t done, int64_t total) {
      bar.update(stage, done, total);
    };
  }
  BenchFigures f;
  f.load_start = load_average();
  engine::Runtime rt(opts);
  if (!leader) return follow_bench(a, modes, rt);
  const bool eager = modes.eager, graph = modes.graph;
  const int breakdown_bs = breakdown_batch(a);
  TempDir cache;

  const engine::ModelInfo& info = rt.info();
  f.model_name = info.name;
  f.model_path = info.path;
  f.architecture = info.architecture;
  f.n_params = info.n_params;
  f.weight_bytes = info.weight_bytes;
  f.isa = matmul_tier_name();
  f.tp = rt.tp_size();
  f.threads = rt.thread_pool()->size();
  f.input_len = a.input_len;
  f.output_len = a.output_len;
  f.max_graph_bs = graph ? a.max_graph_bs : 0;
  f.repeats = a.repeats;
  f.prefill_chunk = a.prefill_chunk;
  f.modes = a.modes;

  std::unique_ptr<engine::GraphRunner> gr;
  int max_captured = 0;
  if (graph) {
    engine::GraphRunnerOptions go = plan_options(a, cache.path);  // empty: the first is cold
    max_captured = *std::max_element(go.batch_sizes.begin(), go.batch_sizes.end());
    gr = std::make_unique<engine::GraphRunner>(rt.model_runner(), rt.weights(), rt.kv_pool(),
                                               *rt.thread_pool(), go);
    const int64_t rss_before = resident_bytes();
    gr->capture([&](int64_t done, int64_t total) { bar.update("capture", done, total); });
    const int64_t rss_growth = resident_bytes() - rss_before;
    const engine::CaptureStats cold = gr->capture_stats();
    KILN_CHECK(!cold.cache_hit, "the first capture into a fresh cache folder hit the cache");
    gr->capture();  // warm: everything from the compile cache just written
    const engine::CaptureStats& warm = gr->capture_stats();
    rt.model_runner().set_plan_replayer(gr.get());
    f.capture = {true,           cold.plans,       cold.seconds,        warm.seconds,
                 warm.cache_hit, warm.arena_bytes, warm.sum_plan_bytes, warm.max_plan_bytes,
                 rss_growth};
    KILN_LOG_INFO(
        "capture seconds, cold / warm: trace {:.3f}/{:.3f}, passes {:.3f}/{:.3f}, prepare "
        "{:.3f}/{:.3f}, cache {:.3f}/{:.3f}, packing merged weights {:.3f}/{:.3f}, bind "
        "{:.3f}/{:.3f}",
        cold.trace_seconds, warm.trace_seconds, cold.pass_seconds, warm.pass_seconds,
        cold.prepare_seconds, warm.prepare_seconds, cold.cache_seconds, warm.cache_seconds,
        cold.pack_seconds, warm.pack_seconds, cold.bind_seconds, warm.bind_seconds);
  }

  // Rank 0's own reads (no collective in it): under --tp the followers wait meanwhile.
  if (a.bandwidth_gbs > 0) {
    f.bandwidth_gbs = a.bandwidth_gbs;
    f.bandwidth_source = "--bandwidth-gbs";
  } else if (!a.no_bandwidth_probe &&
             std::find(a.batch_sizes.begin(), a.batch_sizes.end(), 1) != a.batch_sizes.end()) {
    f.bandwidth_gbs = measure_read_bandwidth_gbs(*rt.thread_pool());
    f.bandwidth_source = "measured: 1 GiB read";
  }

  Bench bench(a, rt, gr.get());
  for (int bs : a.batch_sizes) {
    const bool g = graph && bs <= max_captured;
    if (graph && !g)
      std::fprintf(stderr, "kiln bench: batch %d exceeds --max-graph-bs %d: eager only\n", bs,
                   max_captured);
    std::fprintf(stderr, "kiln bench: batch %d...\n", bs);
    f.batches.push_back(bench.run_batch(bs, eager, g));
  }
  std::vector<RoundFigures> rounds;
  if (a.rounds > 0) {
    for (int r = 1; r <= a.rounds; ++r) {
      for (int bs : a.batch_sizes) {
        if (bs > max_captured) continue;
        std::fprintf(stderr, "kiln bench: round %d of %d, batch %d...\n", r, a.rounds, bs);
        rounds.push_back(bench.run_round(r, bs, /*graph_first=*/r % 2 == 0));
      }
    }
  }
  std::vector<PairedFigures> paired;
  if (a.paired_steps) {
    for (int bs : a.batch_sizes) {
      if (bs > max_captured) continue;
      std::fprintf(stderr, "kiln bench: paired steps, batch %d...\n", bs);
      paired.push_back(bench.run_paired(bs));
    }
  }
  if (a.breakdown) {
    std::fprintf(stderr, "kiln bench: breakdown at batch %d...\n", breakdown_bs);
    f.breakdown_bs = breakdown_bs;
    f.breakdown = bench.breakdown(breakdown_bs);
  }
  f.load_end = load_average();
  if (f.tp > 1) {
    f.tp_summary = rt.tp_summary();
    rt.tp_shutdown();  // the followers are done: they exit while rank 0 writes its results
  }

  std::fputs(format_table(f).c_str(), stdout);
  if (!rounds.empty()) std::fputs(format_rounds(rounds).c_str(), stdout);
  if (!paired.empty()) std::fputs(format_paired(paired).c_str(), stdout);
  if (!a.json_path.empty()) {
    std::ofstream out(a.json_path);
    nlohmann::json j = to_json(f);
    if (!rounds.empty()) j["rounds"] = rounds_json(rounds);
    if (!paired.empty()) j["paired_steps"] = paired_json(paired);
    out << j.dump(2) << "\n";
    KILN_CHECK(out.good(), "cannot write {}", a.json_path);
  }
  if (!a.plot_path.empty()) {
    std::ofstream out(a.plot_path);
    out << to_svg(f);
    KILN_CHECK(out.good(), "cannot write {}", a.plot_path);
  }
  for (const auto& r : rounds) {
    if (!r.tokens_match) {
      std::fprintf(stderr, "kiln bench: round %d: graph and eager tokens differ at batch %d\n",
                   r.round, r.bs);
      return 3;
    }
  }
  for (const auto& p : paired) {
    if (!p.tokens_match) {
      std::fprintf(stderr, "kiln bench: paired steps: graph and eager tokens differ at batch %d\n",
                   p.bs);
      return 3;
    }
  }
  for (const auto& b : f.batches) {
    if (b.tokens_match && !*b.tokens_match) {
      std::fprintf(stderr,
                   "kiln bench: graph mode and eager mode generated different tokens at batch %d\n",
                   b.bs);
      return 3;
    }
  }
  return 0;
}

int run(const BenchArgs& a) {
  set_log_level(a.log_level);
  const Modes modes = parse_modes(a);
  check_args(a, modes);
  std::unique_ptr<Communicator> group = open_tp_group(a.tp);
  return run_tp_guarded(group.get(), [&] { return bench_on_rank(a, modes, group.get()); });
}

}  // namespace

CLI::App* add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Offline benchmark: prefill and decode per batch size, eager vs graph");
  cmd->require_subcommand(0, 1);  // `kiln bench serving ...` (registered by main.cc)
  add_model_options(cmd, args->model, &args->quantize);
  add_kv_dtype_option(cmd, args->kv_dtype);
  cmd->add_option("--batch-sizes", args->batch_sizes, "Batch sizes, comma separated")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--input-len", args->input_len, "Prompt tokens per sequence")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--output-len", args->output_len, "Decode steps (tokens per sequence)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("-t,--threads", args->threads, "Threads (default: all cores)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--max-graph-bs", args->max_graph_bs,
                  "Capture every batch size 1..N, as serving does (default: only the "
                  "benchmarked sizes). On the default model a plan costs ~0.4 MiB; all plans "
                  "share one arena and one output buffer")
      ->check(CLI::Range(0, 512));
  cmd->add_option("--modes", args->modes, "eager,graph or one of them")->delimiter(',');
  cmd->add_option("--json", args->json_path, "Write the results as JSON");
  cmd->add_option("--plot", args->plot_path, "Write an SVG bar chart of decode throughput");
  cmd->add_flag("--op-profile", args->op_profile,
                "Print each profiled decode step's kernel time per op kind (with GB/s of matmul "
                "weights)");
  cmd->add_flag("--breakdown", args->breakdown,
                "Split graph mode's gain at one batch size into removed per-step work, fewer "
                "barriers, fusions");
  cmd->add_option("--breakdown-bs", args->breakdown_bs,
                  "Batch size of --breakdown (default: the first)")
      ->check(CLI::Range(0, 512));
  cmd->add_option("--prefill-chunk", args->prefill_chunk,
                  "Prompt tokens per prefill step (default 512, the engine's chunked prefill size)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--repeats", args->repeats, "Repeats of the probe step (best is kept)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--host-only-steps", args->host_only_steps,
                  "Replays with every kernel skipped, timed per graph batch size to measure "
                  "graph mode's host overhead directly (0: skip)")
      ->check(CLI::Range(0, 10000000));
  cmd->add_option("--rounds", args->rounds,
                  "Then N interleaved eager/graph rounds of the decode loop per batch size "
                  "(order alternating), reported per round and as medians with their spread, "
                  "with process CPU time per step beside wall time")
      ->check(CLI::Range(0, 1000));
  cmd->add_flag("--paired-steps", args->paired_steps,
                "Then one decode loop per batch size in which every step runs in both modes back "
                "to back, order alternating: per-pair eager/graph ratios a drifting host slows "
                "alike (median, 10th-90th percentile, share of pairs graph won)");
  cmd->add_option("--bandwidth-gbs", args->bandwidth_gbs,
                  "Memory bandwidth to compare with (default: measure)")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_flag("--no-bandwidth-probe", args->no_bandwidth_probe,
                "Do not measure the memory bandwidth at batch 1 (its 1 GiB buffer would count in "
                "the peak resident memory of a run that measures prefill)")
      ->excludes("--bandwidth-gbs");
  cmd->add_option("--seed", args->seed, "Seed of the random prompts");
  cmd->add_option("--log-level", args->log_level, "trace|debug|info|warn|error|off");
  add_tp_options(cmd, args->tp);
  cmd->callback([args, cmd] {
    if (!cmd->get_subcommands().empty()) return;  // `kiln bench serving` ran instead
    std::exit(run(*args));
  });
  return cmd;
}

}  // namespace kiln::cli

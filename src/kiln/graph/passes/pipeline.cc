#include "kiln/graph/passes/pipeline.h"

#include <fmt/format.h>

#include <chrono>

#include "kiln/base/error.h"
#include "kiln/graph/passes/cse.h"
#include "kiln/graph/passes/dce.h"
#include "kiln/graph/passes/fuse_add_rms_norm.h"
#include "kiln/graph/passes/fuse_gated_activation.h"
#include "kiln/graph/passes/fuse_lm_head_argmax.h"
#include "kiln/graph/passes/fuse_matmul_add.h"
#include "kiln/graph/passes/fuse_matmul_merge.h"
#include "kiln/graph/passes/fuse_qk_norm_rope_kv_write.h"
#include "kiln/graph/passes/inplace.h"
#include "kiln/graph/passes/noop_elim.h"

namespace kiln::graph {

const std::vector<PassEntry>& pipeline_passes() {
  static const std::vector<PassEntry> passes = {
      // Clean-up first, so the fusions see canonical patterns: no identity reshapes or casts in
      // the middle of a chain, and one node per distinct value.
      {"noop_elim", run_noop_elim, true},
      // After noop_elim: bypassing no-ops makes more nodes identical.
      {"cse", run_cse, true},
      // Before fuse_add_rms_norm: the final norm must still be a plain rms_norm feeding the LM
      // head, not output 1 of an add_rms_norm.
      {"fuse_lm_head_argmax", run_fuse_lm_head_argmax, true},
      // Independent of the others (reads q/k chains and the KV write); early so that q and k
      // are plain projection outputs when GEMMs merge.
      {"fuse_qk_norm_rope_kv_write", run_fuse_qk_norm_rope_kv_write, true},
      // Before fuse_matmul_add: a merged QKV or gate/up GEMM never feeds a residual add, and
      // merging is the bigger win (x read once, one barrier instead of three).
      {"fuse_matmul_merge", run_fuse_matmul_merge, true},
      {"fuse_gated_activation", run_fuse_gated_activation, true},
      // Before fuse_add_rms_norm: both want the residual add. Folding it into the GEMM's
      // epilogue saves writing and re-reading the projection; add_rms_norm then takes the adds
      // that remain (Gemma's, where a post-norm sits between the GEMM and the add).
      {"fuse_matmul_add", run_fuse_matmul_add, true},
      {"fuse_add_rms_norm", run_fuse_add_rms_norm, true},
      // After every rewrite: drops what the fusions left unused (e.g. original weights).
      {"dce", run_dce, true},
      // Last: aliasing depends on the final nodes and their single uses.
      {"inplace", run_inplace, false},
  };
  return passes;
}

const PassEntry* find_pass(std::string_view name) {
  for (const PassEntry& p : pipeline_passes()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::vector<PassStats> run_pipeline(Graph& graph, const PipelineOptions& options) {
  std::vector<PassStats> stats;
  for (const PassEntry& pass : pipeline_passes()) {
    if (pass.rewrites ? !options.rewrites : !options.analyses) continue;
    const auto t0 = std::chrono::steady_clock::now();
    PassResult r = pass.run(graph, options.pass);
    const auto t1 = std::chrono::steady_clock::now();
    if (options.verify_each) {
      try {
        verify(graph);
      } catch (const Error& e) {
        fail("after pass {}: {}", pass.name, e.what());
      }
    }
    stats.push_back(PassStats{std::string(pass.name), r.changed, std::move(r.counters),
                              std::chrono::duration<double, std::milli>(t1 - t0).count(),
                              graph.num_nodes()});
    if (options.after_pass) options.after_pass(pass.name, graph);
  }
  return stats;
}

std::string format_pass_stats(const std::vector<PassStats>& stats) {
  std::string out =
      fmt::format("{:<28} {:>7} {:>9} {:>6}  {}\n", "pass", "changed", "ms", "nodes", "counters");
  for (const PassStats& s : stats) {
    std::string counters;
    for (const auto& [k, v] : s.counters)
      counters += fmt::format("{}{}={}", counters.empty() ? "" : " ", k, v);
    out += fmt::format("{:<28} {:>7} {:>9.3f} {:>6}  {}\n", s.name, s.changed ? "yes" : "no",
                       s.millis, s.nodes_after, counters);
  }
  return out;
}

}  // namespace kiln::graph

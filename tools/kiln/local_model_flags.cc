#include "local_model_flags.h"

#include "default_model.h"
#include "kiln/kernels/kv_cache.h"

namespace kiln::cli {

void add_local_model_flags(CLI::App* cmd, LocalModelFlags& f) {
  add_model_options(cmd, f.model, &f.quantize);
  add_kv_dtype_option(cmd, f.kv_dtype);
  cmd->add_option("-t,--threads", f.runtime.threads, "Threads (default: all cores)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--graph-mode", f.graph_mode, "off | replay | optimize");
  cmd->add_option("--max-graph-bs", f.runtime.max_graph_bs, "Largest captured decode batch")
      ->check(CLI::Range(1, 512));
  cmd->add_option("-c,--ctx-size", f.runtime.context_length,
                  "Context length (default: the model's, capped by the KV pool)")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_flag("--no-compile-cache", f.no_compile_cache,
                "Neither read nor write the compile cache and the packed-weight cache");
  cmd->add_option("--cache-max-gb", f.cache_max_gb,
                  "After loading, remove the least recently used cache entries (compiled plans, "
                  "packed weights) until the cache folder holds at most this many GiB; this run's "
                  "entries are always kept (0: no bound)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_flag("--check-graph", f.runtime.check_graph,
                "Check every graph-mode decode step against eager mode, node by node (slow)");
  cmd->add_option("--log-level", f.log_level, "trace|debug|info|warn|error|off");
}

void add_sampling_flags(CLI::App* cmd, SamplingFlags& f) {
  cmd->add_option("--temp", f.temperature, "Sampling temperature (0: greedy)")
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--top-k", f.top_k, "Top-k (-1: off)");
  cmd->add_option("--top-p", f.top_p, "Top-p")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--min-p", f.min_p, "Min-p")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--seed", f.seed, "Sampling seed");
}

engine::RuntimeOptions runtime_options(const LocalModelFlags& f) {
  engine::RuntimeOptions opts = f.runtime;
  opts.model_path = model_or_default(f.model);
  opts.quantize = f.quantize;
  opts.kv_dtype = kernels::parse_kv_dtype(f.kv_dtype);
  opts.graph_mode = engine::parse_graph_mode(f.graph_mode);
  opts.compile_cache = !f.no_compile_cache;
  opts.cache_max_bytes = static_cast<uint64_t>(f.cache_max_gb * 1073741824.0);
  return opts;
}

engine::SamplingParams sampling_params(const SamplingFlags& f) {
  engine::SamplingParams s;
  s.temperature = f.temperature;
  s.top_k = f.top_k;
  s.top_p = f.top_p;
  s.min_p = f.min_p;
  if (f.seed >= 0) s.seed = static_cast<uint64_t>(f.seed);
  return s;
}

}  // namespace kiln::cli

// The flags of the commands that load a model in-process and generate with it (`kiln run`,
// `kiln chat`): which model and how to run it, and how to sample. One definition, so the two
// commands name, default and check them alike.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "kiln/engine/request.h"
#include "kiln/engine/runtime.h"

namespace kiln::cli {

struct LocalModelFlags {
  std::string model;
  std::string quantize;          // --quantize
  std::string kv_dtype = "f16";  // --kv-dtype
  // --threads, --max-graph-bs, --ctx-size (context_length) and --check-graph bind to these
  // fields directly: their defaults are the library's.
  engine::RuntimeOptions runtime;
  std::string graph_mode = "optimize";
  bool no_compile_cache = false;
  double cache_max_gb = 8.0;
  std::string log_level = "warn";
};

struct SamplingFlags {
  double temperature = 0.0;
  int top_k = -1;
  double top_p = 1.0;
  double min_p = 0.0;
  int64_t seed = -1;
};

void add_local_model_flags(CLI::App* cmd, LocalModelFlags& f);
void add_sampling_flags(CLI::App* cmd, SamplingFlags& f);

// The runtime options the flags name (the model resolved: -m path, installed name or default).
engine::RuntimeOptions runtime_options(const LocalModelFlags& f);
engine::SamplingParams sampling_params(const SamplingFlags& f);

}  // namespace kiln::cli

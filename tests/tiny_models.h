// The tiny random-weight models tests/fixtures/make_models.py writes, one per supported
// architecture, for tests of any layer that run whole models.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace kiln::testing {

// Every tiny fixture model, for INSTANTIATE_TEST_SUITE_P(..., ::testing::ValuesIn(...)).
inline const std::string kTinyModels[] = {"tiny-gemma3", "tiny-llama",   "tiny-qwen2",
                                          "tiny-qwen3",  "tiny-mistral", "tiny-qwen3moe"};

// tests/fixtures' model `name` in the folder KILN_TESTDATA names.
inline std::filesystem::path tiny_model(const std::string& name) {
  const char* d = std::getenv("KILN_TESTDATA");
  return std::filesystem::path(d ? d : "") / "models" / (name + ".gguf");
}

// A test name for a model parameter ("tiny-llama" -> "tiny_llama": gtest names allow no '-').
inline std::string model_param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

}  // namespace kiln::testing

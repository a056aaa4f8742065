// Loads the tokenizer fixtures written by tests/fixtures/make_tokenizer_cases.py.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kiln/model/tokenizer_vocab.h"

namespace kiln::model::testing {

struct TokenizerCase {
  std::string text;
  bool parse_special = false;
  bool space_prefix = false;
  std::vector<int32_t> ids;
};

// The fixture file's path, or nullopt (with the reason in `why`) when it is absent.
inline std::optional<std::filesystem::path> fixture_path(const std::string& name,
                                                         std::string* why) {
  const char* dir = std::getenv("KILN_TESTDATA");
  if (dir == nullptr) {
    *why = "KILN_TESTDATA is not set (run through ctest, which generates the fixtures)";
    return std::nullopt;
  }
  std::filesystem::path p = std::filesystem::path(dir) / "tokenizer" / name;
  if (!std::filesystem::exists(p)) {
    *why = p.string() + " is missing (for Gemma 3: the default model is not installed)";
    return std::nullopt;
  }
  return p;
}

inline nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

inline std::optional<int32_t> optional_id(const nlohmann::json& j) {
  if (j.is_null()) return std::nullopt;
  return j.get<int32_t>();
}

inline TokenizerVocab load_vocab(const std::filesystem::path& p) {
  const nlohmann::json j = read_json(p);
  TokenizerVocab v;
  v.model = j.at("model").get<std::string>();
  v.pre = j.at("pre").get<std::string>();
  v.tokens = j.at("tokens").get<std::vector<std::string>>();
  v.scores = j.at("scores").get<std::vector<float>>();
  v.token_types = j.at("token_types").get<std::vector<int32_t>>();
  v.merges = j.at("merges").get<std::vector<std::string>>();
  v.bos_id = optional_id(j.at("bos_id"));
  v.eos_id = optional_id(j.at("eos_id"));
  v.unk_id = optional_id(j.at("unk_id"));
  v.pad_id = optional_id(j.at("pad_id"));
  v.eot_ids = j.at("eot_ids").get<std::vector<int32_t>>();
  v.add_bos = j.at("add_bos").get<bool>();
  v.add_eos = j.at("add_eos").get<bool>();
  v.add_space_prefix = j.at("add_space_prefix").get<bool>();
  return v;
}

inline std::vector<TokenizerCase> load_cases(const std::filesystem::path& p) {
  std::vector<TokenizerCase> cases;
  for (const nlohmann::json& c : read_json(p)) {
    cases.push_back(
        TokenizerCase{c.at("text").get<std::string>(), c.at("parse_special").get<bool>(),
                      c.at("space_prefix").get<bool>(), c.at("ids").get<std::vector<int32_t>>()});
  }
  return cases;
}

// Readable form of a case's text for failure messages.
inline std::string quoted(const std::string& s) { return nlohmann::json(s).dump(); }

}  // namespace kiln::model::testing

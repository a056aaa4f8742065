#include "kiln/model/hf_tokenizer.h"

#include <optional>
#include <type_traits>

#include "kiln/base/error.h"
#include "kiln/model/tokenizer_pretypes.h"

namespace kiln::model {
namespace {

using nlohmann::json;
constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // U+2581, SentencePiece's space

std::string type_of(const json& j) {
  return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>()
                                                                      : "";
}

// `obj[key]` as a bool or a string: absent, null (or `obj` not an object) give `fallback`; a value
// of another type is refused naming the key. (nlohmann's value() throws a type_error instead,
// which names neither the file nor the key.)
template <typename T>
T field_or(const json& obj, const char* key, T fallback) {
  static_assert(std::is_same_v<T, bool> || std::is_same_v<T, std::string>);
  if (!obj.is_object()) return fallback;
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  constexpr bool kBool = std::is_same_v<T, bool>;
  KILN_CHECK(kBool ? it->is_boolean() : it->is_string(), "tokenizer.json: '{}' must be {}", key,
             kBool ? "true or false" : "a string");
  return it->get<T>();
}
bool bool_or(const json& obj, const char* key, bool fallback) {
  return field_or<bool>(obj, key, fallback);
}
std::string string_or(const json& obj, const char* key, std::string fallback = "") {
  return field_or<std::string>(obj, key, std::move(fallback));
}
// `obj[key]` when it is an object, else an empty object.
json object_or_empty(const json& obj, const char* key) {
  if (!obj.is_object()) return json::object();
  const auto it = obj.find(key);
  return it != obj.end() && it->is_object() ? *it : json::object();
}

// Parsed JSON stores a non-negative integer as unsigned, one built in code as signed.
bool is_non_negative_integer(const json& j) {
  return j.is_number_unsigned() || (j.is_number_integer() && j.get<int64_t>() >= 0);
}

// Token ids beyond this are refused (the size check below, done per id so that no id + 1 wraps).
constexpr size_t kMaxTokens = size_t{1} << 24;

// A Sequence's parts, or the one item.
std::vector<json> flatten(const json& j) {
  if (j.is_null()) return {};
  if (type_of(j) == "Sequence") {
    for (const char* key : {"pretokenizers", "normalizers", "processors"}) {
      if (j.contains(key) && j[key].is_array()) return j[key].get<std::vector<json>>();
    }
    fail("tokenizer.json: a Sequence without parts");
  }
  return {j};
}

// tokenizer_config's special tokens are strings or {"content": ...} objects.
std::optional<std::string> token_text(const json& config, const char* key) {
  if (!config.is_object() || !config.contains(key)) return std::nullopt;
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return std::nullopt;
}

std::optional<bool> config_bool(const json& config, const char* key) {
  if (!config.is_object() || !config.contains(key) || !config[key].is_boolean())
    return std::nullopt;
  return config[key].get<bool>();
}

// The byte-level family's pre-tokenizer: the GGUF pre-type name whose row (tokenizer_pretypes.h)
// gives the flags, and the Split regex as the file states it (run as given).
void read_byte_level_pre(const json& pre_tokenizer, TokenizerVocab& v) {
  const std::vector<json> parts = flatten(pre_tokenizer);
  auto is_byte_level = [](const json& p, bool regex) {
    return type_of(p) == "ByteLevel" && !bool_or(p, "add_prefix_space", false) &&
           bool_or(p, "use_regex", true) == regex;
  };
  if (parts.size() == 1 && is_byte_level(parts[0], true)) {
    v.pre = "gpt2";
    return;
  }
  if (parts.size() == 2 && type_of(parts[0]) == "Split" && is_byte_level(parts[1], false)) {
    const std::string regex = string_or(object_or_empty(parts[0], "pattern"), "Regex");
    const bool isolated =
        string_or(parts[0], "behavior") == "Isolated" && !bool_or(parts[0], "invert", false);
    const PreTokenizerType* type = find_pretokenizer_type_by_hf_regex(regex);
    KILN_CHECK(isolated && type != nullptr,
               "tokenizer.json: byte-level pre-tokenizer regex is not supported (kiln knows "
               "GPT-2's, Llama 3's, Qwen 2's and Qwen 3.5's): {}",
               regex);
    v.pre = std::string(type->names.front());
    v.pre_regexes = {regex};
    return;
  }
  fail("tokenizer.json: pre-tokenizer {} is not supported for byte-level BPE",
       pre_tokenizer.dump().substr(0, 200));
}

// SentencePiece-style: where the U+2581 space prefix goes. Accepts a Metaspace pre-tokenizer
// with no normalizer, or Replace(' ' -> U+2581) with an optional Prepend(U+2581) normalizer.
void read_metaspace(const json& normalizer, const json& pre_tokenizer, TokenizerVocab& v) {
  using Scope = TokenizerVocab::SpacePrefixScope;
  v.add_space_prefix = false;
  bool replaces_spaces = false;
  for (const json& n : flatten(normalizer)) {
    const std::string t = type_of(n);
    if (t == "Replace" && string_or(object_or_empty(n, "pattern"), "String") == " " &&
        string_or(n, "content") == kSpaceSymbol) {
      replaces_spaces = true;
    } else if (t == "Prepend" && string_or(n, "prepend") == kSpaceSymbol) {
      v.add_space_prefix = true;
      v.space_prefix_scope = Scope::kEveryFragment;
    } else {
      fail("tokenizer.json: normalizer '{}' is not supported ({})", t, n.dump().substr(0, 120));
    }
  }
  const std::vector<json> pre = flatten(pre_tokenizer);
  if (pre.empty()) {
    KILN_CHECK(replaces_spaces,
               "tokenizer.json: a SentencePiece-style BPE needs a Metaspace pre-tokenizer or a "
               "Replace(' ', '\u2581') normalizer");
    return;
  }
  KILN_CHECK(pre.size() == 1 && type_of(pre[0]) == "Metaspace" && !replaces_spaces,
             "tokenizer.json: pre-tokenizer {} is not supported for SentencePiece-style BPE",
             pre_tokenizer.dump().substr(0, 200));
  const json& m = pre[0];
  KILN_CHECK(string_or(m, "replacement", std::string(kSpaceSymbol)) == kSpaceSymbol,
             "tokenizer.json: Metaspace replacement other than U+2581 is not supported");
  KILN_CHECK(!bool_or(m, "split", false),
             "tokenizer.json: Metaspace with split = true is not supported");
  std::string scheme = string_or(m, "prepend_scheme");
  if (scheme.empty()) scheme = bool_or(m, "add_prefix_space", true) ? "always" : "never";
  KILN_CHECK(scheme == "first" || scheme == "always" || scheme == "never",
             "tokenizer.json: Metaspace prepend_scheme '{}' is not supported", scheme);
  v.add_space_prefix = scheme != "never";
  v.space_prefix_scope = scheme == "first" ? Scope::kFirstFragment : Scope::kEveryFragment;
  v.space_prefix_unless_space = true;
}

// "<0x41>": a byte-fallback piece.
bool is_byte_piece(const std::string& s) {
  return s.size() == 6 && s.rfind("<0x", 0) == 0 && s[5] == '>';
}

// Whether post_processor adds a special token before (bos) / after (eos) the text, and which.
struct Template {
  std::optional<std::string> first, last;
};
Template read_template(const json& post) {
  Template t;
  for (const json& p : flatten(post)) {
    if (type_of(p) != "TemplateProcessing" || !p.contains("single")) continue;
    const json& single = p["single"];
    if (!single.is_array() || single.empty()) continue;
    auto special = [](const json& item) -> std::optional<std::string> {
      if (item.is_object() && item.contains("SpecialToken")) {
        return string_or(object_or_empty(item, "SpecialToken"), "id");
      }
      return std::nullopt;
    };
    t.first = special(single.front());
    if (single.size() > 1) t.last = special(single.back());
  }
  return t;
}

}  // namespace

TokenizerVocab vocab_from_hf_tokenizer(const json& tok, const json& config, const json& gen) {
  KILN_CHECK(tok.is_object() && tok.contains("model") && tok["model"].is_object(),
             "tokenizer.json has no model");
  const json& model = tok["model"];
  const std::string model_type = type_of(model);
  KILN_CHECK(model_type == "BPE",
             "tokenizer.json: model type '{}' is not supported (kiln reads BPE tokenizers)",
             model_type);
  KILN_CHECK(model.contains("vocab") && model["vocab"].is_object(),
             "tokenizer.json: BPE model has no vocab");
  KILN_CHECK(model.value("continuing_subword_prefix", json()).is_null() &&
                 model.value("end_of_word_suffix", json()).is_null(),
             "tokenizer.json: subword prefixes/suffixes are not supported");

  TokenizerVocab v;
  const bool byte_fallback = bool_or(model, "byte_fallback", false);
  const json& pre = tok.value("pre_tokenizer", json());
  const bool byte_level = !flatten(pre).empty() && type_of(flatten(pre).back()) == "ByteLevel";
  if (byte_level) {
    v.model = "gpt2";
    read_byte_level_pre(pre, v);
    for (const json& n : flatten(tok.value("normalizer", json()))) {
      // kiln does not normalize: NFC text (what Qwen's NFC normalizer leaves alone) is exact.
      KILN_CHECK(type_of(n) == "NFC", "tokenizer.json: normalizer '{}' is not supported",
                 type_of(n));
    }
    if (model.contains("ignore_merges") && !model["ignore_merges"].is_null()) {
      v.ignore_merges = bool_or(model, "ignore_merges", false);
    }
  } else {
    v.model = "llama";
    v.pre = "default";
    read_metaspace(tok.value("normalizer", json()), pre, v);
  }

  // Tokens by id: the BPE vocab, then added tokens (which may reuse or extend its ids).
  const json& added = tok.value("added_tokens", json::array());
  KILN_CHECK(added.is_array() || added.is_null(), "tokenizer.json: 'added_tokens' must be a list");
  size_t n = 0;
  for (const auto& [text, id] : model["vocab"].items()) {
    KILN_CHECK(id.is_number_unsigned(), "tokenizer.json: token '{}' has no valid id", text);
    KILN_CHECK(id.get<size_t>() < kMaxTokens, "tokenizer.json: token id {} is too large",
               id.get<size_t>());
    n = std::max<size_t>(n, id.get<size_t>() + 1);
  }
  for (const json& a : added) {
    // A negative or fractional id would convert to some other size_t and index out of range.
    KILN_CHECK(a.is_object() && a.contains("id") && is_non_negative_integer(a["id"]) &&
                   a.contains("content") && a["content"].is_string(),
               "tokenizer.json: an added token needs an id (a non-negative integer) and content");
    KILN_CHECK(a["id"].get<size_t>() < kMaxTokens, "tokenizer.json: token id {} is too large",
               a["id"].get<size_t>());
    n = std::max<size_t>(n, a["id"].get<size_t>() + 1);
  }
  std::vector<bool> seen(n, false);
  v.tokens.resize(n);
  v.token_types.assign(n, static_cast<int32_t>(TokenType::kNormal));
  for (const auto& [text, id] : model["vocab"].items()) {
    const auto i = id.get<size_t>();
    v.tokens[i] = text;
    seen[i] = true;
    if (byte_fallback && is_byte_piece(text))
      v.token_types[i] = static_cast<int32_t>(TokenType::kByte);
  }
  for (const json& a : added) {
    const auto i = a["id"].get<size_t>();
    v.tokens[i] = a["content"].get<std::string>();
    seen[i] = true;
    v.token_types[i] = static_cast<int32_t>(bool_or(a, "special", false) ? TokenType::kControl
                                                                         : TokenType::kUserDefined);
  }
  for (size_t i = 0; i < n; ++i) {
    KILN_CHECK(seen[i], "tokenizer.json: no token has id {} (ids must be 0..{})", i, n - 1);
  }

  auto id_of = [&](const std::string& text) -> std::optional<int32_t> {
    for (size_t i = 0; i < n; ++i) {
      if (v.tokens[i] == text) return static_cast<int32_t>(i);
    }
    return std::nullopt;
  };
  if (auto unk = model.value("unk_token", json()); unk.is_string()) {
    v.unk_id = id_of(unk.get<std::string>());
    if (v.unk_id) v.token_types[*v.unk_id] = static_cast<int32_t>(TokenType::kUnknown);
  }

  if (model.contains("merges")) {
    KILN_CHECK(model["merges"].is_array(), "tokenizer.json: 'merges' must be a list");
    for (const json& m : model["merges"]) {
      if (m.is_string()) {
        v.merges.push_back(m.get<std::string>());
      } else {
        KILN_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(),
                   "tokenizer.json: a merge must be \"a b\" or [\"a\", \"b\"]");
        v.merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
      }
    }
  }
  KILN_CHECK(!v.merges.empty(), "tokenizer.json: BPE model has no merges");

  // BOS / EOS: tokenizer_config.json names them; whether they are added comes from its
  // add_bos_token / add_eos_token or else from the post-processor's template.
  const Template tmpl = read_template(tok.value("post_processor", json()));
  if (auto bos = token_text(config, "bos_token")) v.bos_id = id_of(*bos);
  if (auto eos = token_text(config, "eos_token")) v.eos_id = id_of(*eos);
  v.add_bos = config_bool(config, "add_bos_token").value_or(tmpl.first.has_value());
  v.add_eos = config_bool(config, "add_eos_token").value_or(tmpl.last.has_value());
  if (v.add_bos && !v.bos_id && tmpl.first) v.bos_id = id_of(*tmpl.first);
  if (v.add_eos && !v.eos_id && tmpl.last) v.eos_id = id_of(*tmpl.last);
  if (auto pad = token_text(config, "pad_token")) v.pad_id = id_of(*pad);

  // generation_config.json's eos_token_id (one id or a list) ends generation too.
  if (gen.is_object() && gen.contains("eos_token_id")) {
    const json& e = gen["eos_token_id"];
    std::vector<int64_t> ids;
    if (e.is_number_integer()) ids.push_back(e.get<int64_t>());
    if (e.is_array()) {
      for (const json& x : e) {
        if (x.is_number_integer()) ids.push_back(x.get<int64_t>());
      }
    }
    for (int64_t id : ids) {
      KILN_CHECK(id >= 0 && static_cast<size_t>(id) < n,
                 "generation_config.json: eos_token_id {} is outside the vocabulary", id);
      if (!v.eos_id) v.eos_id = static_cast<int32_t>(id);
      v.eot_ids.push_back(static_cast<int32_t>(id));
    }
  }
  return v;
}

std::string chat_template_from_hf(const json& config) {
  if (!config.is_object() || !config.contains("chat_template")) return "";
  const json& t = config["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {
    for (const json& named : t) {
      // {"name": ..., "template": ...} entries; anything else names no template.
      if (!named.is_object() || named.value("name", json()) != "default") continue;
      const json text = named.value("template", json());
      return text.is_string() ? text.get<std::string>() : "";
    }
  }
  return "";
}

}  // namespace kiln::model

#include "kiln/model/sentence_encoder.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "kiln/base/error.h"
#include "kiln/model/hf_checkpoint.h"

namespace kiln::model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Rows of one packed forward pass: bounds the activations (about 4 KiB x intermediate / 384
// per row) while keeping every matmul large enough to stream its weights once for many rows.
constexpr size_t kTokensPerBatch = 4096;

json read_json(const fs::path& path) {
  std::ifstream in(path);
  KILN_CHECK(in.good(), "cannot read '{}'", path.string());
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  KILN_CHECK(!j.is_discarded(), "'{}' is not valid JSON", path.string());
  return j;
}

// sentence-transformers' Pooling config: exactly one of its modes may be on.
Pooling pooling_from_config(const json& c, const fs::path& path) {
  struct Mode {
    const char* key;
    std::optional<Pooling> mode;  // nullopt: kiln does not implement it
  };
  const Mode modes[] = {{"pooling_mode_mean_tokens", Pooling::kMean},
                        {"pooling_mode_cls_token", Pooling::kCls},
                        {"pooling_mode_lasttoken", Pooling::kLast},
                        {"pooling_mode_max_tokens", Pooling::kMax},
                        {"pooling_mode_mean_sqrt_len_tokens", std::nullopt},
                        {"pooling_mode_weightedmean_tokens", std::nullopt}};
  std::vector<const Mode*> on;
  for (const Mode& m : modes)
    if (c.value(m.key, false)) on.push_back(&m);
  KILN_CHECK(on.size() == 1, "'{}' turns on {} pooling modes; kiln runs exactly one", path.string(),
             on.size());
  KILN_CHECK(on[0]->mode.has_value(), "'{}': {} is not supported (mean, cls, lasttoken, max are)",
             path.string(), on[0]->key);
  return *on[0]->mode;
}

PoolingSpec read_modules(const fs::path& dir) {
  PoolingSpec spec;
  if (!fs::is_regular_file(dir / "modules.json")) return spec;
  const json modules = read_json(dir / "modules.json");
  KILN_CHECK(modules.is_array(), "'{}' is not a list of modules", (dir / "modules.json").string());
  for (const json& m : modules) {
    const std::string type = m.value("type", "");
    const std::string path = m.value("path", "");
    if (type == "sentence_transformers.models.Transformer") {
      KILN_CHECK(path.empty(), "'{}': the Transformer module in '{}' is not supported",
                 dir.string(), path);
    } else if (type == "sentence_transformers.models.Pooling") {
      const fs::path config = dir / path / "config.json";
      spec.mode = pooling_from_config(read_json(config), config);
    } else if (type == "sentence_transformers.models.Normalize") {
      spec.normalize = true;
    } else {
      fail("'{}': module {} is not supported (Transformer, Pooling and Normalize are)",
           dir.string(), type);
    }
  }
  return spec;
}

}  // namespace

bool SentenceEncoder::is_encoder_dir(const std::string& dir) {
  const fs::path config = fs::path(dir) / "config.json";
  if (!fs::is_regular_file(config)) return false;
  std::ifstream in(config);
  const json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  return !j.is_discarded() && is_bert_config(j);
}

SentenceEncoder::SentenceEncoder(const std::string& dir, EncoderPrecision precision) : dir_(dir) {
  const fs::path d(dir);
  KILN_CHECK(fs::is_regular_file(d / "config.json"), "'{}' has no config.json", dir);
  KILN_CHECK(fs::is_regular_file(d / "tokenizer.json"), "'{}' has no tokenizer.json", dir);
  const BertConfig config = bert_config_from_hf(read_json(d / "config.json"));
  tokenizer_ = BertTokenizer::from_json(read_json(d / "tokenizer.json"));
  KILN_CHECK(static_cast<int64_t>(tokenizer_.vocab_size()) <= config.vocab_size,
             "'{}': tokenizer.json has {} tokens, the model's vocabulary {}", dir,
             tokenizer_.vocab_size(), config.vocab_size);
  pooling_ = read_modules(d);
  max_tokens_ = static_cast<size_t>(config.max_positions);
  if (fs::is_regular_file(d / "sentence_bert_config.json")) {
    const json st = read_json(d / "sentence_bert_config.json");
    KILN_CHECK(!st.value("do_lower_case", false),
               "'{}': sentence_bert_config.json's do_lower_case is not supported", dir);
    if (st.contains("max_seq_length") && st["max_seq_length"].is_number_integer())
      max_tokens_ = std::min(max_tokens_, st["max_seq_length"].get<size_t>());
  }
  KILN_CHECK(max_tokens_ > tokenizer_.special_count(), "'{}': max_seq_length {} leaves no room",
             dir, max_tokens_);
  // transformers 4 saved the position-id buffer (I64) with the weights; it is 0..n-1.
  shards_ = open_hf_weights(
      dir, [](std::string_view name) { return name.ends_with("embeddings.position_ids"); });
  encoder_ = std::make_unique<BertEncoder>(config, shards_, precision);
}

std::vector<float> SentenceEncoder::embed(const std::vector<std::vector<int32_t>>& sequences,
                                          ThreadPool& pool, const PoolingSpec& spec) const {
  const int64_t d = dim();
  std::vector<float> out(sequences.size() * static_cast<size_t>(d));
  for (size_t first = 0; first < sequences.size();) {
    size_t last = first, tokens = 0;
    while (last < sequences.size() &&
           (last == first || tokens + sequences[last].size() <= kTokensPerBatch))
      tokens += sequences[last++].size();
    const std::vector<std::vector<int32_t>> batch(sequences.begin() + static_cast<ptrdiff_t>(first),
                                                  sequences.begin() + static_cast<ptrdiff_t>(last));
    const std::vector<float> hidden = encoder_->forward(batch, pool);
    int64_t row = 0;
    for (size_t i = first; i < last; ++i) {
      const auto len = static_cast<int64_t>(sequences[i].size());
      pool_hidden(hidden.data() + row * d, len, d, spec, out.data() + i * static_cast<size_t>(d));
      row += len;
    }
    first = last;
  }
  return out;
}

}  // namespace kiln::model

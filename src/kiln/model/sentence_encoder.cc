#include "kiln/model/sentence_encoder.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "kiln/base/error.h"
#include "kiln/model/bert_weights.h"
#include "kiln/model/gguf.h"
#include "kiln/model/hf_checkpoint.h"
#include "kiln/model/tokenizer.h"
#include "kiln/model/tokenizer_loader.h"

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

// The tokenizer of a GGUF encoder's vocabulary (tokenizer.ggml.*: llama.cpp's WPM for "bert"),
// with the template its add_bos / add_eos flags give ([CLS] and [SEP] for BERT).
class GgufEncoderTokenizer final : public EncoderTokenizer {
 public:
  explicit GgufEncoderTokenizer(const GgufFile& file)
      : tokenizer_(Tokenizer::create(read_tokenizer_vocab(file))) {}
  std::vector<int32_t> encode(std::string_view text) const override {
    // Special tokens written in the text are matched, as tokenizer.json's added tokens are.
    return tokenizer_->encode(text, /*add_special=*/false, /*parse_special=*/true);
  }
  std::vector<int32_t> add_specials(std::vector<int32_t> ids, size_t max_tokens) const override {
    if (max_tokens > 0 && ids.size() + special_count() > max_tokens)
      ids.resize(max_tokens > special_count() ? max_tokens - special_count() : 0);
    if (tokenizer_->add_bos()) ids.insert(ids.begin(), tokenizer_->bos());
    if (tokenizer_->add_eos()) ids.push_back(tokenizer_->eos());
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids, bool skip_special) const override {
    return tokenizer_->decode(ids, skip_special);
  }
  size_t vocab_size() const override { return static_cast<size_t>(tokenizer_->vocab_size()); }
  size_t special_count() const override {
    return (tokenizer_->add_bos() ? 1 : 0) + (tokenizer_->add_eos() ? 1 : 0);
  }

 private:
  std::unique_ptr<Tokenizer> tokenizer_;
};

bool is_gguf_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::string_view(magic, 4) == "GGUF";
}

// llama.cpp's bert.pooling_type: 1 mean, 2 CLS, 3 last (0 none and 4 rank are not embeddings).
Pooling pooling_from_gguf(const GgufFile& f) {
  const int64_t type = f.has_key("bert.pooling_type") ? f.get_i64("bert.pooling_type") : 1;
  switch (type) {
    case 1:
      return Pooling::kMean;
    case 2:
      return Pooling::kCls;
    case 3:
      return Pooling::kLast;
    default:
      fail("'{}': bert.pooling_type {} is not a sentence embedding (1 mean, 2 CLS, 3 last are)",
           f.path(), type);
  }
}

}  // namespace

bool SentenceEncoder::is_encoder_model(const std::string& path) {
  if (fs::is_regular_file(path)) {
    if (!is_gguf_file(path)) return false;
    try {
      return GgufFile::open(path)->architecture() == "bert";
    } catch (const Error&) {
      return false;  // not a readable GGUF: whoever opens it next says why
    }
  }
  const fs::path config = fs::path(path) / "config.json";
  if (!fs::is_regular_file(config)) return false;
  std::ifstream in(config);
  const json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  return !j.is_discarded() && is_bert_config(j);
}

SentenceEncoder::SentenceEncoder(const std::string& path, EncoderPrecision precision) : dir_(path) {
  if (fs::is_regular_file(path)) {
    const std::shared_ptr<GgufFile> file = GgufFile::open(path);
    const BertConfig config = bert_config_from_gguf(*file);
    tokenizer_ = std::make_unique<GgufEncoderTokenizer>(*file);
    KILN_CHECK(static_cast<int64_t>(tokenizer_->vocab_size()) <= config.vocab_size,
               "'{}': the vocabulary has {} tokens, the embedding table {}", path,
               tokenizer_->vocab_size(), config.vocab_size);
    pooling_ = {pooling_from_gguf(*file), /*normalize=*/true};
    max_tokens_ = static_cast<size_t>(config.max_positions);
    encoder_ = std::make_unique<BertEncoder>(config, *bert_gguf_weights(file), precision);
    return;
  }
  const fs::path d(path);
  const std::string& dir = path;
  KILN_CHECK(fs::is_regular_file(d / "config.json"), "'{}' has no config.json", dir);
  KILN_CHECK(fs::is_regular_file(d / "tokenizer.json"), "'{}' has no tokenizer.json", dir);
  const BertConfig config = bert_config_from_hf(read_json(d / "config.json"));
  tokenizer_ =
      std::make_unique<BertTokenizer>(BertTokenizer::from_json(read_json(d / "tokenizer.json")));
  KILN_CHECK(static_cast<int64_t>(tokenizer_->vocab_size()) <= config.vocab_size,
             "'{}': tokenizer.json has {} tokens, the model's vocabulary {}", dir,
             tokenizer_->vocab_size(), config.vocab_size);
  pooling_ = read_modules(d);
  max_tokens_ = static_cast<size_t>(config.max_positions);
  if (fs::is_regular_file(d / "sentence_bert_config.json")) {
    const json st = read_json(d / "sentence_bert_config.json");
    KILN_CHECK(!st.value("do_lower_case", false),
               "'{}': sentence_bert_config.json's do_lower_case is not supported", dir);
    if (st.contains("max_seq_length") && st["max_seq_length"].is_number_integer())
      max_tokens_ = std::min(max_tokens_, st["max_seq_length"].get<size_t>());
  }
  KILN_CHECK(max_tokens_ > tokenizer_->special_count(), "'{}': max_seq_length {} leaves no room",
             dir, max_tokens_);
  // transformers 4 saved the position-id buffer (I64) with the weights; it is 0..n-1.
  const auto shards = open_hf_weights(
      dir, [](std::string_view name) { return name.ends_with("embeddings.position_ids"); });
  encoder_ = std::make_unique<BertEncoder>(config, *bert_safetensors_weights(shards), precision);
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

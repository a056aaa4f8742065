// `kiln embed -m MODEL -f texts.txt [-o out]`: one embedding per input text from a sentence-
// embedding model folder (a BERT checkpoint with sentence-transformers' modules.json; `kiln pull
// all-minilm-l6-v2` installs one), or from a generative model (GGUF or decoder folder: the
// final-norm hidden state, --pooling last (default) or mean, normalized unless --normalize off;
// embed_decoder.h). Input: one text per line (--json-lines: one JSON string per line, for texts
// with newlines, or a JSON list of token ids, the model input as given). Output: JSON lines (one
// array of floats per text) on stdout or to -o; an -o path ending in .npy gets a float32 [texts,
// dim] NumPy array instead. --ids prints each text's model input (token ids, [CLS]/[SEP] and
// truncation included) instead of running the model: the tokenizer tests compare it with Hugging
// Face `tokenizers`.
#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "default_model.h"
#include "embed_decoder.h"
#include "kiln/base/error.h"
#include "kiln/base/log.h"
#include "kiln/base/thread_pool.h"
#include "kiln/model/sentence_encoder.h"

namespace kiln::cli {
namespace {

struct EmbedArgs {
  std::string model;
  std::string input;
  std::string output;
  bool json_lines = false;
  bool ids = false;
  std::string pooling;
  std::string normalize;  // "", "on", "off"
  std::string precision = "bf16";
  int threads = 0;
  std::string log_level = "warn";
};

struct Inputs {
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> ids;  // non-empty: the line was a list of token ids
};

Inputs read_inputs(const std::string& path, bool json_lines) {
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK(in.good(), "cannot open text file '{}'", path);
  Inputs inputs;
  std::vector<std::string>& texts = inputs.texts;
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    inputs.ids.emplace_back();
    if (!json_lines) {
      texts.push_back(line);
      continue;
    }
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    const bool ids =
        !j.is_discarded() && j.is_array() && !j.empty() &&
        std::all_of(j.begin(), j.end(), [](const nlohmann::json& v) {
          return v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= INT32_MAX;
        });
    KILN_CHECK(ids || (!j.is_discarded() && j.is_string()),
               "'{}' line {}: not a JSON string or a list of token ids", path, number);
    texts.push_back(ids ? std::string() : j.get<std::string>());
    if (ids) inputs.ids.back() = j.get<std::vector<int32_t>>();
  }
  return inputs;
}

model::PoolingSpec pooling_flags(const EmbedArgs& a, model::PoolingSpec spec) {
  if (!a.pooling.empty()) {
    const auto mode = model::pooling_from_name(a.pooling);
    KILN_CHECK(mode.has_value(), "--pooling must be mean, cls, last or max, not '{}'", a.pooling);
    spec.mode = *mode;
  }
  if (!a.normalize.empty()) {
    KILN_CHECK(a.normalize == "on" || a.normalize == "off", "--normalize must be on or off");
    spec.normalize = a.normalize == "on";
  }
  return spec;
}

// NumPy's .npy format, version 1.0: magic, header length, a Python dict literal padded with
// spaces to a multiple of 64 bytes and ending in '\n', then the little-endian data.
void write_npy(const std::string& path, const std::vector<float>& data, size_t rows, size_t cols) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(rows) + ", " + std::to_string(cols) + "), }";
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary);
  KILN_CHECK(out.good(), "cannot write '{}'", path);
  out.write("\x93NUMPY\x01\x00", 8);
  const auto len = static_cast<uint16_t>(header.size());
  const char len_bytes[2] = {static_cast<char>(len & 0xFF), static_cast<char>(len >> 8)};
  out.write(len_bytes, 2);
  out << header;
  out.write(reinterpret_cast<const char*>(data.data()),
            static_cast<std::streamsize>(data.size() * sizeof(float)));
  KILN_CHECK(out.good(), "cannot write '{}'", path);
}

void write_json_lines(std::FILE* f, const std::vector<float>& data, size_t rows, size_t cols) {
  std::string line;
  for (size_t r = 0; r < rows; ++r) {
    line = '[';
    for (size_t c = 0; c < cols; ++c) {
      if (c > 0) line.push_back(',');
      char buf[32];
      // %.9g round-trips every float.
      std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(data[r * cols + c]));
      line.append(buf);
    }
    line.append("]\n");
    std::fwrite(line.data(), 1, line.size(), f);
  }
}

int run_embed(const EmbedArgs& a) {
  KILN_CHECK(!a.model.empty(),
             "kiln embed needs -m: an embedding model (folder or name) or a "
             "generative model");
  KILN_CHECK(!a.input.empty(), "kiln embed needs -f: a file with one text per line");
  set_log_level(a.log_level);
  const std::string path = resolve_model_name(a.model);
  const Inputs in = read_inputs(a.input, a.json_lines);
  const std::vector<std::string>& texts = in.texts;
  const int threads = a.threads > 0
                          ? a.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<float> vectors;
  size_t dim = 0;
  if (model::SentenceEncoder::is_encoder_model(path)) {
    const model::SentenceEncoder encoder(path, model::encoder_precision_from_name(a.precision));
    std::vector<std::vector<int32_t>> inputs;
    inputs.reserve(texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
      inputs.push_back(in.ids[i].empty() ? encoder.tokenize(texts[i]) : in.ids[i]);
      KILN_CHECK(inputs.back().size() <= encoder.max_tokens(),
                 "input {} has {} token ids; the model takes at most {}", i + 1,
                 inputs.back().size(), encoder.max_tokens());
    }
    if (a.ids) {
      for (const auto& ids : inputs)
        std::printf("%s\n", nlohmann::json{{"ids", ids}}.dump().c_str());
      return 0;
    }
    ThreadPool pool(threads);
    vectors = encoder.embed(inputs, pool, pooling_flags(a, encoder.pooling()));
    dim = static_cast<size_t>(encoder.dim());
  } else {
    KILN_CHECK(!a.ids, "--ids is for embedding model folders (BERT)");
    // Decoders trained to embed (e5-mistral, Qwen3-Embedding) take the last token, normalized.
    const model::PoolingSpec spec =
        pooling_flags(a, model::PoolingSpec{model::Pooling::kLast, /*normalize=*/true});
    DecoderEmbeddings d = embed_with_decoder(path, texts, in.ids, spec, threads);
    vectors = std::move(d.vectors);
    dim = static_cast<size_t>(d.dim);
  }
  if (a.output.ends_with(".npy")) {
    write_npy(a.output, vectors, texts.size(), dim);
  } else if (!a.output.empty()) {
    std::FILE* f = std::fopen(a.output.c_str(), "wb");
    KILN_CHECK(f != nullptr, "cannot write '{}': {}", a.output, std::strerror(errno));
    write_json_lines(f, vectors, texts.size(), dim);
    KILN_CHECK(std::fclose(f) == 0, "cannot write '{}'", a.output);
  } else {
    write_json_lines(stdout, vectors, texts.size(), dim);
  }
  return 0;
}

}  // namespace

void add_embed_command(CLI::App& app) {
  auto args = std::make_shared<EmbedArgs>();
  CLI::App* cmd = app.add_subcommand(
      "embed", "Embed texts (one per line) with a sentence-embedding model (docs/embeddings.md)");
  cmd->add_option("-m,--model", args->model,
                  "Embedding model folder or the name `kiln pull` installed it under, or a "
                  "generative model (GGUF or folder: final-norm hidden state, last/mean)");
  cmd->add_option("-f,--file", args->input, "Input: one text per line");
  cmd->add_option("-o,--output", args->output,
                  "Output file: .npy (float32 [texts, dim]) or JSON lines (default: stdout)");
  cmd->add_flag("--json-lines", args->json_lines,
                "Each input line is a JSON string, or a JSON list of token ids (used as given)");
  cmd->add_flag("--ids", args->ids, "Print each text's token ids instead of embedding it");
  cmd->add_option("--pooling", args->pooling,
                  "mean | cls | last | max (default: the folder's Pooling module; decoders: last)");
  cmd->add_option("--normalize", args->normalize,
                  "on | off: unit-length vectors (default: whether the folder has Normalize; "
                  "decoders: on)");
  cmd->add_option("--precision", args->precision,
                  "bf16 | f32: the encoder's matrix arithmetic (embedding folders; default bf16, "
                  "twice as fast, a cosine of ~3e-5 from f32: docs/embeddings.md)");
  cmd->add_option("-t,--threads", args->threads, "Worker threads (default: all cores)");
  cmd->add_option("--log-level", args->log_level, "trace|debug|info|warn|error|off");
  cmd->callback([args] { std::exit(run_embed(*args)); });
}

}  // namespace kiln::cli

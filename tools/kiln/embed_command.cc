// `kiln embed -m MODEL -f texts.txt [-o out]`: one embedding per input text from a sentence-
// embedding model folder (a BERT checkpoint with sentence-transformers' modules.json; `kiln pull
// all-minilm-l6-v2` installs one). Input: one text per line (--json-lines: one JSON string per
// line, for texts with newlines). Output: JSON lines (one array of floats per text) on stdout or
// to -o; an -o path ending in .npy gets a float32 [texts, dim] NumPy array instead. --ids prints
// each text's model input (token ids, [CLS]/[SEP] and truncation included) instead of running
// the model: the tokenizer tests compare it with Hugging Face `tokenizers`.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "default_model.h"
#include "kiln/base/error.h"
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
  int threads = 0;
};

std::vector<std::string> read_texts(const std::string& path, bool json_lines) {
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK(in.good(), "cannot open text file '{}'", path);
  std::vector<std::string> texts;
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!json_lines) {
      texts.push_back(line);
      continue;
    }
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    KILN_CHECK(!j.is_discarded() && j.is_string(), "'{}' line {}: not a JSON string", path, number);
    texts.push_back(j.get<std::string>());
  }
  return texts;
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
  KILN_CHECK(!a.model.empty(), "kiln embed needs -m: a sentence-embedding model folder or name");
  KILN_CHECK(!a.input.empty(), "kiln embed needs -f: a file with one text per line");
  const std::string path = resolve_model_name(a.model);
  KILN_CHECK(model::SentenceEncoder::is_encoder_dir(path),
             "'{}' is not an embedding model folder (a BERT checkpoint with config.json, "
             "tokenizer.json and model.safetensors)",
             path);
  const std::vector<std::string> texts = read_texts(a.input, a.json_lines);
  const model::SentenceEncoder encoder(path);
  std::vector<std::vector<int32_t>> inputs;
  inputs.reserve(texts.size());
  for (const std::string& t : texts) inputs.push_back(encoder.tokenize(t));
  if (a.ids) {
    for (const auto& ids : inputs) std::printf("%s\n", nlohmann::json{{"ids", ids}}.dump().c_str());
    return 0;
  }
  model::PoolingSpec spec = encoder.pooling();
  if (!a.pooling.empty()) {
    const auto mode = model::pooling_from_name(a.pooling);
    KILN_CHECK(mode.has_value(), "--pooling must be mean, cls, last or max, not '{}'", a.pooling);
    spec.mode = *mode;
  }
  if (!a.normalize.empty()) {
    KILN_CHECK(a.normalize == "on" || a.normalize == "off", "--normalize must be on or off");
    spec.normalize = a.normalize == "on";
  }
  const int threads = a.threads > 0
                          ? a.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ThreadPool pool(threads);
  const std::vector<float> vectors = encoder.embed(inputs, pool, spec);
  const auto dim = static_cast<size_t>(encoder.dim());
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
                  "Embedding model folder, or the name `kiln pull` installed it under");
  cmd->add_option("-f,--file", args->input, "Input: one text per line");
  cmd->add_option("-o,--output", args->output,
                  "Output file: .npy (float32 [texts, dim]) or JSON lines (default: stdout)");
  cmd->add_flag("--json-lines", args->json_lines, "Each input line is one JSON string");
  cmd->add_flag("--ids", args->ids, "Print each text's token ids instead of embedding it");
  cmd->add_option("--pooling", args->pooling,
                  "mean | cls | last | max (default: the model folder's Pooling module)");
  cmd->add_option("--normalize", args->normalize,
                  "on | off: unit-length vectors (default: whether the folder has Normalize)");
  cmd->add_option("-t,--threads", args->threads, "Worker threads (default: all cores)");
  cmd->callback([args] { std::exit(run_embed(*args)); });
}

}  // namespace kiln::cli

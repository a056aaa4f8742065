// The packed-weights file (model/packed_weights_file.h) through the Runtime on tiny fixture
// models: a cold start packs and writes it, a warm start maps it instead of packing, and gives
// the same logits bit for bit; a corrupted, truncated or stale file (the model file changed) is
// never used; the cache option that disables the compile cache disables it too. And each byte
// is packed once: graph mode holds exactly the packed bytes eager mode holds.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "kiln/engine/runtime.h"
#include "kiln/model/weight_store.h"
#include "model_harness.h"
#include "tiny_runtime.h"

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

// Every logit of a prefill and 4 decode steps (graph plans in graph mode) for one prompt.
std::vector<float> run_logits(engine::Runtime& rt) {
  ModelHarness h(rt.executor(), rt.kv_pool());
  Sequence seq;
  std::vector<float> out;
  std::vector<int32_t> tokens = {5, 17, 42, 9, 3, 77, 12};
  for (int s = 0; s < 5; ++s) {
    auto rows = h.step({&seq}, {tokens});
    out.insert(out.end(), rows[0].begin(), rows[0].end());
    tokens = {argmax(rows[0])};
  }
  return out;
}

class PackedWeightsFile : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    model_ = tiny_model(GetParam());
    ASSERT_TRUE(fs::exists(model_)) << "fixture missing: " << model_;
    dir_ = fs::temp_directory_path() /
           ("kiln-packed-weights-test-" + std::to_string(::getpid()) + "-" + GetParam());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  engine::RuntimeOptions options(const fs::path& model,
                                 engine::GraphMode mode = engine::GraphMode::Optimize) const {
    engine::RuntimeOptions o = tiny_runtime_options(model, mode, 2);
    o.compile_cache = true;
    o.cache_dir = dir_.string();
    return o;
  }
  std::vector<fs::path> files() const {
    std::vector<fs::path> out;
    if (!fs::exists(dir_)) return out;
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().extension() == ".kpw") out.push_back(e.path());
    return out;
  }
  struct Run {
    model::PackStats stats;
    std::vector<float> logits;
  };
  Run run(const engine::RuntimeOptions& o) const {
    engine::Runtime rt(o);
    Run r{rt.weights().pack_stats(), {}};
    r.logits = run_logits(rt);
    return r;
  }

  fs::path model_;
  fs::path dir_;
};

TEST_P(PackedWeightsFile, ColdWritesWarmMapsSameLogits) {
  const Run cold = run(options(model_));
  EXPECT_FALSE(cold.stats.file_hit);
  EXPECT_TRUE(cold.stats.file_stored);
  ASSERT_EQ(files().size(), 1u);
  const Run warm = run(options(model_));
  EXPECT_TRUE(warm.stats.file_hit);
  EXPECT_FALSE(warm.stats.file_stored);
  EXPECT_EQ(warm.stats.released_bytes, 0u);  // the model file's weight pages were not read
  EXPECT_EQ(warm.stats.bytes, cold.stats.bytes);
  EXPECT_EQ(warm.logits, cold.logits);  // bit for bit
  // Eager mode reads the same file (the layout does not depend on the mode).
  const Run eager = run(options(model_, engine::GraphMode::Off));
  EXPECT_TRUE(eager.stats.file_hit);
  EXPECT_EQ(files().size(), 1u);
}

// Flips one byte of the packed data: the checksum refuses the file, which is rewritten.
TEST_P(PackedWeightsFile, CorruptedFileIsRepackedNotTrusted) {
  const Run cold = run(options(model_));
  ASSERT_EQ(files().size(), 1u);
  {
    std::fstream f(files()[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-100, std::ios::end);
    char c = 0;
    f.get(c);
    f.seekp(-100, std::ios::end);
    f.put(static_cast<char>(c ^ 0x10));
  }
  const Run again = run(options(model_));
  EXPECT_FALSE(again.stats.file_hit);
  EXPECT_TRUE(again.stats.file_stored);
  EXPECT_EQ(again.logits, cold.logits);
  EXPECT_TRUE(run(options(model_)).stats.file_hit);  // the rewritten file is good
}

TEST_P(PackedWeightsFile, TruncatedFileIsRepacked) {
  const Run cold = run(options(model_));
  ASSERT_EQ(files().size(), 1u);
  fs::resize_file(files()[0], fs::file_size(files()[0]) - 4096);
  const Run again = run(options(model_));
  EXPECT_FALSE(again.stats.file_hit);
  EXPECT_TRUE(again.stats.file_stored);
  EXPECT_EQ(again.logits, cold.logits);
  fs::resize_file(files()[0], 100);  // not even a whole header
  EXPECT_FALSE(run(options(model_)).stats.file_hit);
}

// A model file rewritten in place (same path) with other weights never hits the old file.
TEST_P(PackedWeightsFile, ChangedModelFileIsAMiss) {
  fs::create_directories(dir_);
  const fs::path copy = dir_ / "model.gguf";
  fs::copy_file(model_, copy);
  const Run first = run(options(copy));
  EXPECT_TRUE(first.stats.file_stored);
  {  // change the last byte (tensor data) of the copy: a different model, same path and size
    std::fstream f(copy, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    char c = 0;
    f.get(c);
    f.seekp(-1, std::ios::end);
    f.put(static_cast<char>(c ^ 0x01));
  }
  // Same size; the modification time moves (a coarse-clock file system might not: force it).
  fs::last_write_time(copy, fs::last_write_time(copy) + std::chrono::seconds(2));
  const Run second = run(options(copy));
  EXPECT_FALSE(second.stats.file_hit);
  EXPECT_TRUE(second.stats.file_stored);
  EXPECT_EQ(files().size(), 2u);
}

// A writer killed mid-write leaves `<entry>.tmp.<pid>` (as large as the weights): the next
// write removes it when that process is gone.
TEST_P(PackedWeightsFile, OrphanedTemporaryFileIsRemoved) {
  run(options(model_));
  ASSERT_EQ(files().size(), 1u);
  const fs::path entry = files()[0];
  const fs::path orphan = entry.string() + ".tmp.999999999";  // above any pid_max: not running
  fs::rename(entry, orphan);
  EXPECT_TRUE(run(options(model_)).stats.file_stored);
  EXPECT_FALSE(fs::exists(orphan));
  EXPECT_TRUE(fs::exists(entry));
}

// A folder that cannot be written (here: below a regular file; a full disk fails the same
// write calls) costs a warning; the model runs on its packed copy.
TEST_P(PackedWeightsFile, UnwritableFolderRunsWithoutTheCache) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "not-a-folder") << "x";
  engine::RuntimeOptions o = options(model_);
  o.cache_dir = (dir_ / "not-a-folder" / "cache").string();
  const Run r = run(o);
  EXPECT_FALSE(r.stats.file_hit);
  EXPECT_FALSE(r.stats.file_stored);
  EXPECT_EQ(r.logits, run(options(model_)).logits);
}

TEST_P(PackedWeightsFile, DisabledWithTheCompileCache) {
  engine::RuntimeOptions o = options(model_);
  o.compile_cache = false;
  const Run r = run(o);
  EXPECT_FALSE(r.stats.file_hit);
  EXPECT_FALSE(r.stats.file_stored);
  EXPECT_TRUE(files().empty());
}

// Graph mode packs nothing beyond what eager mode packs: the merged QKV and gate/up weights
// capture uses are the ones prepack packed, their parts views of them. Without that, the
// merged copies came on top (about +45% of the packed bytes on a Llama-shaped model).
TEST_P(PackedWeightsFile, GraphModePacksEachByteOnce) {
  engine::RuntimeOptions eager_o = tiny_runtime_options(model_, engine::GraphMode::Off, 2);
  engine::RuntimeOptions graph_o = tiny_runtime_options(model_, engine::GraphMode::Optimize, 2);
  engine::Runtime eager(eager_o);
  engine::Runtime graph(graph_o);
  EXPECT_EQ(graph.weights().pack_stats().bytes, eager.weights().pack_stats().bytes);
  EXPECT_EQ(graph.weights().pack_stats().tensors, eager.weights().pack_stats().tensors);
}

INSTANTIATE_TEST_SUITE_P(TinyModels, PackedWeightsFile,
                         ::testing::Values("tiny-llama", "tiny-qwen3moe"), model_param_name);

}  // namespace
}  // namespace kiln::testing

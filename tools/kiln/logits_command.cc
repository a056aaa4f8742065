// `kiln logits`: the logits of every position of one token sequence, written as raw float32
// rows, for comparisons against other implementations (bench/default_model_vs_transformers.py).
// Each position is fed as one decode step, so the rows come from the same path as generation.
// Under --tp (mpirun -np N kiln logits ... --tp N) rank 0 drives the steps and writes the file;
// the full rows come from the LM head's vocabulary all-gather (docs/tensor-parallel.md).
#include <cstdio>
#include <fstream>

#include "commands.h"
#include "default_model.h"
#include "kiln/base/error.h"
#include "kiln/base/log.h"
#include "kiln/engine/runtime.h"
#include "kiln/engine/sequence_stepper.h"
#include "kiln/kernels/kv_cache.h"
#include "tp_group.h"

namespace kiln::cli {
namespace {

struct LogitsArgs {
  std::string model;
  std::string quantize;          // --quantize
  std::string kv_dtype = "f16";  // --kv-dtype
  std::string ids_file;
  std::string out;
  std::string graph_mode = "optimize";
  int threads = 0;
  std::string log_level = "warn";
  TpArgs tp;
};

std::vector<int32_t> read_ids(const std::string& path) {
  std::ifstream in(path);
  KILN_CHECK(in.good(), "cannot open token id file '{}'", path);
  std::vector<int32_t> ids;
  int64_t id = 0;
  while (in >> id) {
    KILN_CHECK(id >= 0 && id <= INT32_MAX, "token id {} out of range in '{}'", id, path);
    ids.push_back(static_cast<int32_t>(id));
  }
  KILN_CHECK(in.eof(), "'{}' holds something other than whitespace-separated token ids", path);
  KILN_CHECK(!ids.empty(), "'{}' holds no token ids", path);
  return ids;
}

int logits_on_rank(const LogitsArgs& a, Communicator* group) {
  const std::vector<int32_t> ids = read_ids(a.ids_file);  // every rank: it sizes the KV pool
  engine::RuntimeOptions opts;
  opts.model_path = model_or_default(a.model);
  opts.quantize = a.quantize;
  opts.kv_dtype = kernels::parse_kv_dtype(a.kv_dtype);
  opts.threads = a.threads;
  opts.graph_mode = engine::parse_graph_mode(a.graph_mode);
  opts.max_graph_bs = 1;
  opts.kv_tokens = static_cast<int64_t>(ids.size()) + 64;
  opts.tp = group;
  engine::Runtime rt(opts);
  if (rt.tp_rank() > 0) {  // runs the steps rank 0 broadcasts
    rt.run_tp_follower();
    return 0;
  }
  const int64_t vocab = rt.info().vocab_size;
  for (int32_t id : ids) KILN_CHECK(id < vocab, "token id {} >= vocab size {}", id, vocab);

  std::ofstream out(a.out, std::ios::binary);
  KILN_CHECK(out.good(), "cannot write '{}'", a.out);
  engine::SequenceStepper stepper(rt.executor(), rt.kv_pool());
  engine::SteppedSequence seq;
  for (int32_t id : ids) {
    auto rows = stepper.step({&seq}, {{id}});
    out.write(reinterpret_cast<const char*>(rows[0].data()),
              static_cast<std::streamsize>(rows[0].size() * sizeof(float)));
  }
  stepper.release(seq);
  rt.tp_shutdown();
  KILN_CHECK(out.good(), "write to '{}' failed", a.out);
  std::printf("{\"positions\": %zu, \"vocab\": %lld}\n", ids.size(), static_cast<long long>(vocab));
  return 0;
}

int run_logits(const LogitsArgs& a) {
  set_log_level(a.log_level);
  std::unique_ptr<Communicator> group = open_tp_group(a.tp);
  return run_tp_guarded(group.get(), [&] { return logits_on_rank(a, group.get()); });
}

}  // namespace

void add_logits_command(CLI::App& app) {
  auto args = std::make_shared<LogitsArgs>();
  CLI::App* cmd = app.add_subcommand(
      "logits", "Write the logits of every position of a token sequence (float32 rows)");
  add_model_options(cmd, args->model, &args->quantize);
  add_kv_dtype_option(cmd, args->kv_dtype);
  cmd->add_option("--ids", args->ids_file, "File of whitespace-separated token ids")->required();
  cmd->add_option("-o,--out", args->out, "Output file: [positions, vocab] float32")->required();
  cmd->add_option("--graph-mode", args->graph_mode, "off | replay | optimize");
  cmd->add_option("-t,--threads", args->threads, "Threads (default: all cores)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--log-level", args->log_level, "trace|debug|info|warn|error|off");
  add_tp_options(cmd, args->tp);
  cmd->callback([args] { std::exit(run_logits(*args)); });
}

}  // namespace kiln::cli

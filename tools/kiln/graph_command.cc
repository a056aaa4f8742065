// `kiln graph`: the decode graph of a model as the compiler sees it. Prints the IR before and
// after passes, the per-pass statistics, the memory plan and the schedule, and writes Graphviz
// DOT (and SVG through the `dot` program when it is installed). Reads only the GGUF metadata
// and tensor infos (engine/graph_mode/graph_inspector.h), so it answers in well under a second.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "commands.h"
#include "default_model.h"
#include "kiln/base/error.h"
#include "kiln/engine/graph_mode/graph_inspector.h"
#include "kiln/graph/dot.h"
#include "kiln/graph/printer.h"

namespace kiln::cli {
namespace {

struct GraphArgs {
  std::string model;
  int bs = 1;
  bool greedy = false;
  std::string graph_mode = "optimize";
  bool print_before = false;
  std::string print_after;  // a pass name, or "all"
  bool stats = false;
  bool memory = false;
  bool schedule = false;
  std::string dot_path;
  std::string svg_path;
};

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  KILN_CHECK(f.good(), "cannot write {}", path);
  f << text;
  f.close();
  KILN_CHECK(f.good(), "error writing {}", path);
}

// Single-quotes a path for /bin/sh.
std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

bool have_program(const char* name) {
  return std::system(fmt::format("command -v {} >/dev/null 2>&1", name).c_str()) == 0;
}

std::string mib(size_t bytes) { return fmt::format("{:.2f} MiB", bytes / 1048576.0); }

int run(const GraphArgs& a) {
  if (!a.print_after.empty() && a.print_after != "all") {
    KILN_CHECK(graph::find_pass(a.print_after) != nullptr,
               "unknown pass '{}' for --print-after (passes: {})", a.print_after, [] {
                 std::string names;
                 for (const auto& p : graph::pipeline_passes())
                   names += (names.empty() ? "" : ", ") + std::string(p.name);
                 return names;
               }());
  }
  engine::GraphInspectOptions o;
  o.model_path = model_or_default(a.model);
  o.batch_size = a.bs;
  o.greedy = a.greedy;
  KILN_CHECK(a.graph_mode == "optimize" || a.graph_mode == "replay",
             "--graph-mode must be optimize or replay");
  o.optimize = a.graph_mode == "optimize";
  // After-pass IR is collected and printed after the before-pass IR, in pipeline order.
  std::string after_text;
  if (!a.print_after.empty()) {
    o.after_pass = [&](std::string_view pass, const graph::Graph& g) {
      if (a.print_after != "all" && pass != a.print_after) return;
      after_text += fmt::format("// ---- IR after pass {} ----\n{}\n", pass, graph::print(g));
    };
  }
  engine::GraphInspection r = engine::inspect_graph(o);
  if (a.print_before)
    std::printf("// ---- IR before passes ----\n%s\n", graph::print(r.traced).c_str());
  std::fputs(after_text.c_str(), stdout);

  std::printf("model: %s (%s) %s\n", r.model_name.c_str(), r.architecture.c_str(),
              r.model_path.c_str());
  std::printf(
      "graph: decode B=%d, %s plan, graph mode %s: %d nodes traced -> %d after passes "
      "(trace %.1f ms, passes %.1f ms)\n",
      a.bs, a.greedy ? "greedy" : "logits", a.graph_mode.c_str(), r.traced.num_nodes(),
      r.optimized.num_nodes(), r.trace_ms, r.pipeline_ms);
  if (a.stats) std::printf("\npass statistics:\n%s\n", graph::format_pass_stats(r.passes).c_str());
  std::printf("memory: arena %s, planned %s, reuse ratio %.2fx, %zu buffers\n",
              mib(r.memory.arena_bytes).c_str(), mib(r.memory.planned_bytes).c_str(),
              r.memory.reuse_ratio(), r.memory.buffers.size());
  if (a.memory) std::printf("%s\n", r.memory.describe().c_str());
  std::printf(
      "schedule: before passes %d ops in %d levels (barriers per step: %d with one per op, %d with "
      "one "
      "per level); after passes %d ops in %d levels (%d / %d), widest level %d\n",
      r.schedule_before.ops, r.schedule_before.levels, r.schedule_before.ops,
      r.schedule_before.levels, r.schedule_after.ops, r.schedule_after.levels, r.schedule_after.ops,
      r.schedule_after.levels, r.schedule_after.max_width);
  if (a.schedule) {
    std::printf("%s\n",
                graph::describe_schedule(r.optimized, graph::schedule_levels(r.optimized)).c_str());
  }

  if (!a.dot_path.empty() || !a.svg_path.empty()) {
    const std::string dot = graph::to_dot(r.optimized);
    if (!a.dot_path.empty()) {
      write_file(a.dot_path, dot);
      std::printf("wrote %s\n", a.dot_path.c_str());
    }
    if (!a.svg_path.empty()) {
      if (!have_program("dot")) {
        std::printf(
            "not writing %s: Graphviz `dot` is not installed (apt-get install graphviz); use --dot "
            "FILE "
            "and render it elsewhere\n",
            a.svg_path.c_str());
        return 1;
      }
      std::string tmp = a.svg_path + ".dot.tmp";
      write_file(tmp, dot);
      int rc =
          std::system(("dot -Tsvg -o " + shell_quote(a.svg_path) + " " + shell_quote(tmp)).c_str());
      std::filesystem::remove(tmp);
      KILN_CHECK(rc == 0, "dot failed (exit status {}) rendering {}", rc, a.svg_path);
      std::printf("wrote %s\n", a.svg_path.c_str());
    }
  }
  return 0;
}

}  // namespace

void add_graph_command(CLI::App& app) {
  auto args = std::make_shared<GraphArgs>();
  CLI::App* cmd = app.add_subcommand(
      "graph", "Show the decode graph: IR per pass, pass stats, memory, schedule, DOT");
  add_model_options(cmd, args->model);
  cmd->add_option("--bs", args->bs, "Decode batch size B")->check(CLI::Range(1, 4096));
  cmd->add_flag("--greedy", args->greedy,
                "The greedy plan (lm_head + argmax) instead of the logits plan");
  cmd->add_option("--graph-mode", args->graph_mode,
                  "optimize (every pass) | replay (analyses only)");
  cmd->add_flag("--print-before", args->print_before, "Print the IR as traced, before any pass");
  cmd->add_option("--print-after", args->print_after,
                  "Print the IR after this pass, or after every pass (all)");
  cmd->add_flag("--stats", args->stats, "Per-pass statistics table");
  cmd->add_flag("--memory", args->memory, "Every planned buffer (offset, size, lifetime)");
  cmd->add_flag("--schedule", args->schedule, "The nodes of every dependency level");
  cmd->add_option("--dot", args->dot_path, "Write the optimized graph as Graphviz DOT");
  cmd->add_option("--svg", args->svg_path, "Render the optimized graph to SVG with Graphviz `dot`");
  cmd->callback([args] { std::exit(run(*args)); });
}

}  // namespace kiln::cli

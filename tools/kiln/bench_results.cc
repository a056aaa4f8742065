#include "bench_results.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kiln::cli {
namespace {

using Json = nlohmann::json;

double mean_step_ms(const ModeFigures& m, int output_len) {
  return m.ran && output_len > 0 ? 1e3 * m.decode_seconds / output_len : 0;
}

std::string cell(bool ok, double v, const char* spec = "{:.1f}") {
  return ok ? fmt::format(fmt::runtime(spec), v) : std::string("-");
}

Json mode_json(const ModeFigures& m, int output_len) {
  if (!m.ran) return nullptr;
  return {{"decode_seconds", m.decode_seconds},
          {"decode_tok_s", m.decode_tok_s},
          {"mean_step_ms", mean_step_ms(m, output_len)},
          {"probe_step_ms", m.step_ms},
          {"kernel_ms", m.kernels_profiled ? Json(m.kernel_ms) : Json(nullptr)},
          {"overhead_ms", m.kernels_profiled ? Json(m.overhead_ms) : Json(nullptr)},
          {"kernels_per_step", m.kernels_profiled ? Json(m.kernels) : Json(nullptr)},
          {"barriers_per_step", m.barriers},
          {"barriers_unfused_per_step", m.barriers_unfused},
          {"host_only_step_us", m.host_only_us},
          {"host_only_replays", m.host_only_replays},
          // The greedy tokens of the timed loop, per sequence (prompts are seeded: two runs
          // on the same model, TP or not, can be compared token by token).
          {"tokens", m.tokens}};
}

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

std::string loadavg(const std::vector<double>& l) {
  return l.size() == 3 ? fmt::format("{:.2f} {:.2f} {:.2f}", l[0], l[1], l[2]) : std::string("n/a");
}

}  // namespace

double weight_gbs(const BenchFigures& f, double step_ms) {
  return step_ms > 0 ? static_cast<double>(f.weight_bytes) / (step_ms * 1e-3) / 1e9 : 0;
}

std::string format_table(const BenchFigures& f) {
  std::string s;
  s += fmt::format(
      "kiln bench: {} ({}, {:.0f}M params, {:.1f} MiB of weights read per decode step{})\n",
      f.model_name, f.architecture, f.n_params / 1e6, f.weight_bytes / 1048576.0,
      f.tp > 1 ? " by rank 0" : "");
  const std::string ranks = f.tp > 1 ? fmt::format("tp {}, threads {} per rank", f.tp, f.threads)
                                     : fmt::format("threads {}", f.threads);
  s += fmt::format(
      "{}, isa {}, input {} tokens, output {} tokens, prefill chunk {} tokens, probe "
      "repeats {}\n",
      ranks, f.isa, f.input_len, f.output_len, f.prefill_chunk, f.repeats);
  if (f.tp > 1) {
    s += fmt::format(
        "tensor parallel: {} ranks, figures of rank 0 (capture, memory, host overhead, "
        "bandwidth); kernel time not profiled under --tp; rank 0: {}\n",
        f.tp, f.tp_summary);
  }
  s += fmt::format("load average (1/5/15 min): {} at start, {} at end\n", loadavg(f.load_start),
                   loadavg(f.load_end));
  if (f.capture.ran) {
    s += fmt::format(
        "capture: {} plans, cold {:.3f} s, warm {:.3f} s ({}); shared arena {:.2f} MiB vs {:.2f} "
        "MiB summed "
        "per-plan peaks (largest plan {:.2f} MiB); resident memory +{:.1f} MiB\n",
        f.capture.plans, f.capture.cold_seconds, f.capture.warm_seconds,
        f.capture.warm_cache_hit ? "compile cache hit" : "CACHE MISS",
        f.capture.arena_bytes / 1048576.0, f.capture.sum_plan_bytes / 1048576.0,
        f.capture.max_plan_bytes / 1048576.0, f.capture.rss_growth_bytes / 1048576.0);
  }
  s += "\n";
  s += fmt::format("{:>4} | {:>10} {:>10} | {:>10} {:>10} {:>7} | {:>5}\n", "bs", "prefill ms",
                   "prefill/s", "eager tok/s", "graph tok/s", "speedup", "same");
  for (const auto& b : f.batches) {
    const bool both = b.eager.ran && b.graph.ran;
    s += fmt::format(
        "{:>4} | {:>10.1f} {:>10.1f} | {:>11} {:>11} {:>7} | {:>5}\n", b.bs,
        1e3 * b.prefill_seconds, b.prefill_tok_s, cell(b.eager.ran, b.eager.decode_tok_s),
        cell(b.graph.ran, b.graph.decode_tok_s),
        both ? fmt::format("{:.2f}x", b.graph.decode_tok_s / b.eager.decode_tok_s) : "-",
        b.tokens_match ? (*b.tokens_match ? "yes" : "NO") : "-");
  }
  s += "\nper decode step (probe: one mid-sequence step, best of repeats; overhead = step - kernel "
       "time):\n";
  s += fmt::format("{:>4} | {:>28} | {:>28} | {:>23}\n", "bs", "eager ms: step kern  ovh",
                   "graph ms: step kern  ovh", "barriers: graph/unf/eager");
  for (const auto& b : f.batches) {
    auto mode = [](const ModeFigures& m) {
      if (!m.ran) return fmt::format("{:>28}", "-");
      return fmt::format("{:>9.3f} {:>8} {:>8}", m.step_ms,
                         cell(m.kernels_profiled, m.kernel_ms, "{:.3f}"),
                         cell(m.kernels_profiled, m.overhead_ms, "{:.3f}"));
    };
    s += fmt::format("{:>4} | {} | {} | {:>23}\n", b.bs, mode(b.eager), mode(b.graph),
                     fmt::format("{}/{}/{}", b.graph.ran ? std::to_string(b.graph.barriers) : "-",
                                 b.graph.ran ? std::to_string(b.graph.barriers_unfused) : "-",
                                 b.eager.ran ? std::to_string(b.eager.barriers) : "-"));
  }
  for (const auto& b : f.batches) {
    if (!b.graph.ran || b.graph.host_only_replays == 0) continue;
    s += fmt::format(
        "graph host overhead, batch {}: {:.1f} us per step, measured directly ({} "
        "replays with every kernel skipped)\n",
        b.bs, b.graph.host_only_us, b.graph.host_only_replays);
  }
  for (const auto& b : f.batches) {
    if (b.bs != 1 || f.bandwidth_gbs <= 0) continue;
    s += fmt::format("\nbatch 1 vs memory bandwidth ({:.1f} GB/s, {}):", f.bandwidth_gbs,
                     f.bandwidth_source);
    for (const auto* m : {&b.eager, &b.graph}) {
      if (!m->ran) continue;
      const double gbs = weight_gbs(f, mean_step_ms(*m, f.output_len));
      s += fmt::format(" {} {:.1f} GB/s = {:.0f}%", m == &b.eager ? "eager" : "graph", gbs,
                       100 * gbs / f.bandwidth_gbs);
    }
    s += " (weight bytes per step / mean decode step time)\n";
  }
  if (!f.breakdown.empty()) {
    s += fmt::format("\nbreakdown at batch {} (probe step, best of {}):\n", f.breakdown_bs,
                     f.repeats);
    s += fmt::format("  {:<26} {:>9} {:>9} {:>9} {:>8} {:>9}\n", "configuration", "step ms",
                     "kernel ms", "ovh ms", "kernels", "barriers");
    for (const auto& r : f.breakdown) {
      s += fmt::format("  {:<26} {:>9.3f} {:>9.3f} {:>9.3f} {:>8} {:>9}   {}\n", r.name, r.step_ms,
                       r.kernel_ms, r.overhead_ms, r.kernels, r.barriers, r.description);
    }
    auto find = [&](const char* n) -> const BreakdownRow* {
      for (const auto& r : f.breakdown)
        if (r.name == n) return &r;
      return nullptr;
    };
    const BreakdownRow *e = find("eager"), *rp = find("replay, op barriers"),
                       *rl = find("replay, level barriers"), *ol = find("optimize, level barriers");
    if (e && rp && rl && ol) {
      const double total = e->step_ms - ol->step_ms;
      auto part = [&](const char* what, double ms) {
        return fmt::format("  {:<26} {:>+9.3f} ms ({:.0f}% of the gain)\n", what, ms,
                           total != 0 ? 100 * ms / total : 0.0);
      };
      s += fmt::format("  gain eager -> graph: {:.3f} ms per step ({:.2f}x)\n", total,
                       e->step_ms / ol->step_ms);
      s += part("removed per-step work", e->step_ms - rp->step_ms);
      s += part("fewer barriers", rp->step_ms - rl->step_ms);
      s += part("fusions", rl->step_ms - ol->step_ms);
    }
  }
  return s;
}

Json to_json(const BenchFigures& f) {
  Json j;
  j["model"] = {{"name", f.model_name},
                {"path", f.model_path},
                {"architecture", f.architecture},
                {"n_params", f.n_params},
                {"weight_bytes_per_step", f.weight_bytes}};
  j["config"] = {{"tp", f.tp},
                 {"threads", f.threads},  // per rank
                 {"isa", f.isa},
                 {"input_len", f.input_len},
                 {"output_len", f.output_len},
                 {"max_graph_bs", f.max_graph_bs},
                 {"modes", f.modes},
                 {"prefill_chunk", f.prefill_chunk},
                 {"probe_repeats", f.repeats}};
  j["load_average"] = {{"start", f.load_start}, {"end", f.load_end}};
  if (f.tp > 1) j["tp_rank0"] = f.tp_summary;
  if (f.capture.ran) {
    j["capture"] = {{"plans", f.capture.plans},
                    {"cold_seconds", f.capture.cold_seconds},
                    {"warm_seconds", f.capture.warm_seconds},
                    {"warm_cache_hit", f.capture.warm_cache_hit},
                    {"arena_bytes", f.capture.arena_bytes},
                    {"sum_plan_bytes", f.capture.sum_plan_bytes},
                    {"max_plan_bytes", f.capture.max_plan_bytes},
                    {"rss_growth_bytes", f.capture.rss_growth_bytes}};
  } else {
    j["capture"] = nullptr;
  }
  j["bandwidth"] = {{"gbs", f.bandwidth_gbs}, {"source", f.bandwidth_source}};
  j["results"] = Json::array();
  for (const auto& b : f.batches) {
    Json r = {{"batch_size", b.bs},
              {"prefill",
               {{"seconds", b.prefill_seconds},
                {"tok_s", b.prefill_tok_s},
                {"chunks", b.prefill_chunks}}},
              {"eager", mode_json(b.eager, f.output_len)},
              {"graph", mode_json(b.graph, f.output_len)}};
    r["speedup"] = b.eager.ran && b.graph.ran ? Json(b.graph.decode_tok_s / b.eager.decode_tok_s)
                                              : Json(nullptr);
    r["tokens_match"] = b.tokens_match ? Json(*b.tokens_match) : Json(nullptr);
    if (b.bs == 1 && f.bandwidth_gbs > 0) {
      Json bw;
      for (const auto* m : {&b.eager, &b.graph}) {
        if (!m->ran) continue;
        const double gbs = weight_gbs(f, mean_step_ms(*m, f.output_len));
        bw[m == &b.eager ? "eager" : "graph"] = {{"weight_gbs", gbs},
                                                 {"fraction", gbs / f.bandwidth_gbs}};
      }
      r["bandwidth_fraction"] = bw;
    }
    j["results"].push_back(r);
  }
  if (!f.breakdown.empty()) {
    Json rows = Json::array();
    for (const auto& r : f.breakdown) {
      rows.push_back({{"name", r.name},
                      {"description", r.description},
                      {"step_ms", r.step_ms},
                      {"kernel_ms", r.kernel_ms},
                      {"overhead_ms", r.overhead_ms},
                      {"kernels", r.kernels},
                      {"barriers", r.barriers}});
    }
    j["breakdown"] = {{"batch_size", f.breakdown_bs}, {"configurations", rows}};
  }
  return j;
}

// Grouped bars: decode tok/s per batch size, eager and graph side by side, speedup on top.
std::string to_svg(const BenchFigures& f) {
  const int W = 720, H = 420, left = 70, right = 20, top = 50, bottom = 60;
  const int pw = W - left - right, ph = H - top - bottom;
  double ymax = 1;
  for (const auto& b : f.batches)
    ymax = std::max({ymax, b.eager.decode_tok_s, b.graph.decode_tok_s});
  // A round axis maximum: 1, 2 or 5 times a power of ten.
  const double mag = std::pow(10.0, std::floor(std::log10(ymax)));
  double axis = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= ymax) {
      axis = m * mag;
      break;
    }
  }
  auto y = [&](double v) { return top + ph - ph * v / axis; };
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      W, H);
  s += fmt::format(
      "<text x=\"{}\" y=\"22\" font-size=\"15\" text-anchor=\"middle\">{}: decode throughput, "
      "eager vs "
      "graph ({}{} threads, input {}, output {})</text>\n",
      W / 2, xml_escape(f.model_name), f.tp > 1 ? fmt::format("tp {} x ", f.tp) : "", f.threads,
      f.input_len, f.output_len);
  for (int i = 0; i <= 5; ++i) {
    const double v = axis * i / 5;
    s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n",
                     left, left + pw, y(v), y(v));
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:g}</text>\n", left - 6,
                     y(v) + 4, v);
  }
  s += fmt::format(
      "<text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {})\" text-anchor=\"middle\">decode "
      "tokens/s"
      "</text>\n",
      top + ph / 2, top + ph / 2);
  const int n = std::max<int>(1, static_cast<int>(f.batches.size()));
  const double group = static_cast<double>(pw) / n, bar = group * 0.3;
  for (int i = 0; i < static_cast<int>(f.batches.size()); ++i) {
    const auto& b = f.batches[i];
    const double x0 = left + group * i + group * 0.2;
    const struct {
      const ModeFigures* m;
      const char* color;
    } bars[] = {{&b.eager, "#999999"}, {&b.graph, "#d9541e"}};
    for (int k = 0; k < 2; ++k) {
      if (!bars[k].m->ran) continue;
      const double v = bars[k].m->decode_tok_s, x = x0 + k * bar;
      s += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"/>\n", x,
          y(v), bar, top + ph - y(v), bars[k].color);
      s += fmt::format(
          "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"10\">{:.0f}</text>\n",
          x + bar / 2, y(v) - 3, v);
    }
    if (b.eager.ran && b.graph.ran) {
      s += fmt::format(
          "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" "
          "font-weight=\"bold\">{:.2f}x</text>\n",
          x0 + bar, y(std::max(b.eager.decode_tok_s, b.graph.decode_tok_s)) - 16,
          b.graph.decode_tok_s / b.eager.decode_tok_s);
    }
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">bs {}</text>\n", x0 + bar,
                     top + ph + 18, b.bs);
  }
  s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"black\"/>\n", left,
                   left + pw, top + ph, top + ph);
  s += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"#999999\"/><text x=\"{}\" "
      "y=\"{}\">"
      "eager</text>\n",
      left, H - 22, left + 16, H - 12);
  s += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"#d9541e\"/><text x=\"{}\" "
      "y=\"{}\">"
      "graph</text>\n",
      left + 80, H - 22, left + 96, H - 12);
  s += "</svg>\n";
  return s;
}

}  // namespace kiln::cli

#include "perplexity_scoring.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "kiln/base/error.h"

namespace kiln::cli {
namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'K', 'L', 'D', '1'};

template <typename T>
void put(std::ofstream& out, const T& v) {
  out.write(reinterpret_cast<const char*>(&v), sizeof(T));
}
template <typename T>
T get(std::ifstream& in, const std::string& path) {
  T v{};
  in.read(reinterpret_cast<char*>(&v), sizeof(T));
  KILN_CHECK(in.good(), "'{}' ends early: a truncated KL-divergence base file", path);
  return v;
}

int32_t argmax(const float* row, int64_t vocab) {
  return static_cast<int32_t>(std::max_element(row, row + vocab) - row);
}

double percentile(std::vector<double> sorted, double q) {
  if (sorted.empty()) return 0;
  const auto i = static_cast<size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

// Mean and the standard error of the mean.
std::pair<double, double> mean_and_error(const std::vector<double>& v) {
  const auto n = static_cast<double>(v.size());
  if (v.empty()) return {0, 0};
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / n;
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  return {mean, v.size() > 1 ? std::sqrt(var / (n - 1) / n) : 0.0};
}

}  // namespace

double log_sum_exp(const float* row, int64_t vocab) {
  KILN_CHECK(vocab > 0, "an empty logits row");
  const double mx = *std::max_element(row, row + vocab);
  KILN_CHECK(std::isfinite(mx), "the model produced a non-finite logit");
  double z = 0;
  for (int64_t i = 0; i < vocab; ++i) z += std::exp(static_cast<double>(row[i]) - mx);
  return mx + std::log(std::max(z, 1.0));  // z >= 1: the largest logit contributes exp(0)
}

void NllAccumulator::add(double logprob) {
  nll_ -= logprob;
  nll2_ += logprob * logprob;
  ++count_;
}

double NllAccumulator::ppl() const { return std::exp(mean_nll()); }

double NllAccumulator::ppl_error() const {
  if (count_ < 2) return 0;
  const double mean = mean_nll();
  const double var = nll2_ / static_cast<double>(count_) - mean * mean;
  return var > 0 ? std::sqrt(var / static_cast<double>(count_ - 1)) * ppl() : 0.0;
}

KldBaseWriter::KldBaseWriter(const std::string& path, const KldHeader& header)
    : out_(path, std::ios::binary), path_(path), header_(header) {
  KILN_CHECK(out_.good(), "cannot write '{}'", path);
  out_.write(kMagic, sizeof(kMagic));
  put(out_, header.n_ctx);
  put(out_, header.n_chunks);
  put(out_, header.top_k);
  put(out_, header.vocab);
  put(out_, static_cast<int32_t>(header.tokens.size()));
  out_.write(reinterpret_cast<const char*>(header.tokens.data()),
             static_cast<std::streamsize>(header.tokens.size() * sizeof(int32_t)));
}

void KldBaseWriter::add(const float* row, int32_t next_token) {
  const double lse = log_sum_exp(row, header_.vocab);
  std::vector<int32_t> ids(static_cast<size_t>(header_.vocab));
  std::iota(ids.begin(), ids.end(), 0);
  const auto k = static_cast<size_t>(std::min(header_.top_k, header_.vocab));
  std::partial_sort(
      ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(),
      [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
  put(out_, static_cast<float>(row[next_token] - lse));
  double top_mass = 0;
  for (size_t i = 0; i < k; ++i) {
    const double lp = row[ids[i]] - lse;
    top_mass += std::exp(lp);
    put(out_, ids[i]);
    put(out_, static_cast<float>(lp));
  }
  put(out_, static_cast<float>(std::log(std::max(1.0 - top_mass, 0.0))));
}

void KldBaseWriter::close() {
  out_.close();
  KILN_CHECK(!out_.fail(), "writing '{}' failed", path_);
}

KldComparer::KldComparer(const std::string& path, const KldHeader& expected)
    : in_(path, std::ios::binary), path_(path) {
  KILN_CHECK(in_.good(), "cannot open the KL-divergence base file '{}'", path);
  char magic[sizeof(kMagic)] = {};
  in_.read(magic, sizeof(magic));
  KILN_CHECK(in_.good() && std::memcmp(magic, kMagic, sizeof(kMagic)) == 0,
             "'{}' is not a kiln KL-divergence base file (made by --kl-divergence-base)", path);
  const auto n_ctx = get<int32_t>(in_, path);
  const auto n_chunks = get<int32_t>(in_, path);
  top_k_ = get<int32_t>(in_, path);
  vocab_ = get<int32_t>(in_, path);
  const auto n_tokens = get<int32_t>(in_, path);
  KILN_CHECK(top_k_ > 0 && vocab_ > 0 && n_tokens >= 0, "'{}' has a corrupt header", path);
  KILN_CHECK(n_ctx == expected.n_ctx, "'{}' was made with --ctx-size {}, not {}", path, n_ctx,
             expected.n_ctx);
  KILN_CHECK(vocab_ == expected.vocab, "'{}' was made with a vocabulary of {} tokens, not {}", path,
             vocab_, expected.vocab);
  KILN_CHECK(n_chunks >= expected.n_chunks, "'{}' holds {} chunks, fewer than the {} asked for",
             path, n_chunks, expected.n_chunks);
  std::vector<int32_t> tokens(static_cast<size_t>(n_tokens));
  in_.read(reinterpret_cast<char*>(tokens.data()),
           static_cast<std::streamsize>(tokens.size() * sizeof(int32_t)));
  KILN_CHECK(in_.good(), "'{}' ends early: a truncated KL-divergence base file", path);
  KILN_CHECK(tokens.size() >= expected.tokens.size() &&
                 std::equal(expected.tokens.begin(), expected.tokens.end(), tokens.begin()),
             "'{}' was made from other tokens (another text or tokenizer)", path);
}

void KldComparer::add(const float* row, int32_t next_token) {
  const double lse = log_sum_exp(row, vocab_);
  const auto base_lp = get<float>(in_, path_);
  summary_.base.add(base_lp);
  summary_.q.add(row[next_token] - lse);
  double kld = 0, top_mass_q = 0, top_mass_b = 0;
  int32_t base_top = -1;
  for (int32_t i = 0; i < top_k_; ++i) {
    const auto id = get<int32_t>(in_, path_);
    const auto lp_b = get<float>(in_, path_);
    KILN_CHECK(id >= 0 && id < vocab_, "'{}' has a corrupt token id {}", path_, id);
    if (i == 0) base_top = id;
    const double lp_q = row[id] - lse;
    const double p_b = std::exp(static_cast<double>(lp_b));
    kld += p_b * (lp_b - lp_q);
    top_mass_q += std::exp(lp_q);
    top_mass_b += p_b;
  }
  const auto tail_b = static_cast<double>(get<float>(in_, path_));
  const double p_tail_b = std::exp(tail_b);
  const double p_tail_q = std::max(1.0 - top_mass_q, 1e-300);
  if (p_tail_b > 0) kld += p_tail_b * (tail_b - std::log(p_tail_q));
  summary_.kld.push_back(std::max(kld, 0.0));
  summary_.tail_mass_sum += 1.0 - top_mass_b;
  summary_.same_top += argmax(row, vocab_) == base_top ? 1 : 0;
}

void KldComparer::print() const {
  const KldSummary& s = summary_;
  const auto n = static_cast<double>(s.kld.size());
  auto [kld_mean, kld_err] = mean_and_error(s.kld);
  std::vector<double> sorted = s.kld;
  std::sort(sorted.begin(), sorted.end());
  const double same = n > 0 ? static_cast<double>(s.same_top) / n : 0;
  const double same_err = n > 1 ? std::sqrt(same * (1 - same) / (n - 1)) : 0;
  std::printf("====== Perplexity statistics ======\n");
  std::printf("Mean PPL(Q)                   : %10.6f ± %10.6f\n", s.q.ppl(), s.q.ppl_error());
  std::printf("Mean PPL(base)                : %10.6f ± %10.6f\n", s.base.ppl(),
              s.base.ppl_error());
  std::printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f\n", s.q.mean_nll() - s.base.mean_nll());
  std::printf("====== KL divergence statistics (top %d + rest) ======\n", top_k_);
  std::printf("Mean    KLD: %10.6f ± %10.6f\n", kld_mean, kld_err);
  std::printf("Maximum KLD: %10.6f\n", sorted.empty() ? 0.0 : sorted.back());
  std::printf("99.9%%   KLD: %10.6f\n", percentile(sorted, 0.999));
  std::printf("99.0%%   KLD: %10.6f\n", percentile(sorted, 0.990));
  std::printf("Median  KLD: %10.6f\n", percentile(sorted, 0.5));
  std::printf("Base mass outside the top %d: %.6f (mean)\n", top_k_,
              n > 0 ? s.tail_mass_sum / n : 0.0);
  std::printf("====== Token probability statistics ======\n");
  std::printf("Same top p: %6.3f ± %5.3f %%\n", 100.0 * same, 100.0 * same_err);
  std::printf(
      "{\"ppl_q\": %.6f, \"ppl_base\": %.6f, \"mean_kld\": %.8f, \"mean_kld_error\": %.8f, "
      "\"max_kld\": %.8f, \"same_top\": %.6f, \"positions\": %lld, \"top_k\": %d}\n",
      s.q.ppl(), s.base.ppl(), kld_mean, kld_err, sorted.empty() ? 0.0 : sorted.back(), same,
      static_cast<long long>(s.kld.size()), top_k_);
}

}  // namespace kiln::cli

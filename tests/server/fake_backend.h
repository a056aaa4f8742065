// A fake model for server tests: a byte-level codec and an engine that "generates" a
// deterministic letter sequence from the prompt, one token per step on its own thread, with
// the engine's event contract (one finished event per request, stop strings withheld and
// matched, cancel -> abort, queue limit -> QueueFull). It lets the HTTP layer be tested for
// shapes, streaming, disconnects and errors without a model.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kiln/base/error.h"
#include "kiln/server/backend.h"

namespace kiln::server::testing {

// ids: 0 pad, 1 BOS, 2 EOS, 3 + byte.
class FakeCodec final : public TextCodec {
 public:
  static constexpr int32_t kBos = 1, kEos = 2, kByte0 = 3;
  std::vector<int32_t> encode(std::string_view text, bool add_special) const override {
    encoded_bytes += text.size();
    std::vector<int32_t> ids;
    if (add_special) ids.push_back(kBos);
    for (unsigned char c : text) ids.push_back(kByte0 + c);
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids, bool skip_special) const override {
    std::string s;
    for (int32_t id : ids) {
      if (id >= kByte0) {
        s.push_back(static_cast<char>(id - kByte0));
      } else if (!skip_special) {
        s += id == kBos ? "<bos>" : id == kEos ? "<eos>" : "<pad>";
      }
    }
    return s;
  }
  std::string render_chat(const std::vector<ChatMessage>& turns,
                          const std::vector<std::string>& tools) const override {
    std::string text;
    for (const auto& tool : tools) text += "tool: " + tool + "\n";
    for (const auto& t : turns) {
      text += t.role + ": " + t.content;
      for (const auto& c : t.tool_calls) text += " call " + c.name + " " + c.arguments;
      text += "\n";
    }
    return text + "assistant:";
  }
  std::string tools_refusal() const override { return tools_ok ? "" : "the fake has no tools"; }
  ToolCallFormat tool_call_format() const override {
    return tools_ok ? ToolCallFormat::kHermes : ToolCallFormat::kNone;
  }
  bool tools_ok = true;
  int64_t vocab_size() const override { return 300; }
  size_t max_token_bytes() const override { return 1; }
  Specials specials() const override { return {"<bos>", "<eos>", "<pad>", ""}; }

  // Bytes of text encode() was given, so tests can tell whether a prompt was tokenized.
  mutable std::atomic<size_t> encoded_bytes{0};
};

// Output token k of a request is letter ('a' + (sum(prompt) + 3k + seed) % 26); with
// `eos_after` > 0 the request emits EOS after that many tokens (unless ignore_eos).
class FakeEngine final : public GenerationBackend {
 public:
  explicit FakeEngine(int step_ms = 1, int max_queued = 1000, int eos_after = 0)
      : step_ms_(step_ms), max_queued_(max_queued), eos_after_(eos_after) {
    thread_ = std::thread([this] { loop(); });
  }
  ~FakeEngine() override { shutdown(); }

  static std::string expected_text(const std::vector<int32_t>& prompt, int n, uint64_t seed = 0) {
    std::string s;
    for (int k = 0; k < n; ++k) s.push_back(static_cast<char>(letter(prompt, k, seed)));
    return s;
  }

  uint64_t submit(engine::GenerateRequest request, engine::EventCallback cb) override {
    if (request.prompt_ids.empty()) fail("empty prompt");
    std::lock_guard lock(mu_);
    if (static_cast<int>(active_.size()) >= max_queued_) throw engine::QueueFull();
    uint64_t id = next_id_++;
    active_.push_back({id, std::move(request), std::move(cb), {}, 0, 0});
    cv_.notify_one();
    return id;
  }
  void cancel(uint64_t id) override {
    std::lock_guard lock(mu_);
    cancelled_.push_back(id);
    cancel_calls_++;
  }
  bool flush_cache() override {
    std::lock_guard lock(mu_);
    return active_.empty();
  }
  engine::EngineStats stats() const override {
    std::lock_guard lock(mu_);
    engine::EngineStats s;
    s.running = static_cast<int64_t>(active_.size());
    s.kv_pages_total = 100;
    s.kv_pages_used = static_cast<int64_t>(active_.size());
    s.requests_finished = finished_;
    return s;
  }
  void shutdown() {
    {
      std::lock_guard lock(mu_);
      if (stop_) return;
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  int cancel_calls() const {
    std::lock_guard lock(mu_);
    return cancel_calls_;
  }
  int64_t aborted() const {
    std::lock_guard lock(mu_);
    return aborted_;
  }
  size_t active() const {
    std::lock_guard lock(mu_);
    return active_.size();
  }
  engine::GenerateRequest last_request() const {
    std::lock_guard lock(mu_);
    return last_request_;
  }

 private:
  struct Active {
    uint64_t id;
    engine::GenerateRequest req;
    engine::EventCallback cb;
    std::string text;
    int produced = 0;
    size_t emitted = 0;  // bytes of text sent
  };
  static int letter(const std::vector<int32_t>& prompt, int k, uint64_t seed) {
    int64_t sum = 0;
    for (int32_t t : prompt) sum += t;
    return 'a' + static_cast<int>((sum + 3 * k + static_cast<int64_t>(seed % 26)) % 26);
  }

  void finish(Active& a, engine::RequestEvent& e, engine::FinishReason reason) {
    e.finished = true;
    e.finish_reason = reason;
    if (reason == engine::FinishReason::Abort) ++aborted_;
    ++finished_;
    last_request_ = a.req;
  }

  // One step: every active request gets one token (or its abort/finish).
  void step() {
    std::vector<std::pair<engine::EventCallback, engine::RequestEvent>> out;
    {
      std::lock_guard lock(mu_);
      for (auto it = active_.begin(); it != active_.end();) {
        Active& a = *it;
        engine::RequestEvent e;
        e.request_id = a.id;
        e.prompt_tokens = static_cast<int>(a.req.prompt_ids.size());
        bool cancelled =
            stop_ || std::find(cancelled_.begin(), cancelled_.end(), a.id) != cancelled_.end();
        if (cancelled) {
          finish(a, e, engine::FinishReason::Abort);
        } else if (eos_after_ > 0 && a.produced == eos_after_ && !a.req.stop.ignore_eos) {
          e.new_tokens = {FakeCodec::kEos};
          a.produced++;
          finish(a, e, engine::FinishReason::Stop);
          e.matched_stop_token = FakeCodec::kEos;
        } else {
          uint64_t seed = a.req.sampling.seed.value_or(0);
          int tok = letter(a.req.prompt_ids, a.produced, seed);
          a.produced++;
          e.new_tokens = {FakeCodec::kByte0 + tok};
          if (a.req.logprobs >= 0) {
            engine::TokenLogprob lp{FakeCodec::kByte0 + tok, -0.5f, {}};
            for (int j = 0; j < a.req.logprobs; ++j)
              lp.top.push_back({FakeCodec::kByte0 + 'a' + j, -1.0f - j});
            e.logprobs.push_back(lp);
          }
          a.text.push_back(static_cast<char>(tok));
          // Like the real engine, text that may be the start of a stop string is withheld.
          size_t safe = a.text.size();
          for (const auto& s : a.req.stop.stop_strings) {
            size_t pos = a.text.find(s);
            if (pos != std::string::npos) {
              safe = pos;
              e.matched_stop = s;
              finish(a, e, engine::FinishReason::Stop);
              break;
            }
            for (size_t k = std::min(s.size() - 1, a.text.size()); k > 0; --k) {
              if (a.text.compare(a.text.size() - k, k, s, 0, k) == 0) {
                safe = std::min(safe, a.text.size() - k);
                break;
              }
            }
          }
          if (!e.finished && a.produced >= a.req.stop.max_new_tokens) {
            safe = a.text.size();
            finish(a, e, engine::FinishReason::Length);
          }
          e.text_delta = a.text.substr(a.emitted, safe - a.emitted);
          a.emitted = safe;
        }
        e.completion_tokens = a.produced;
        out.push_back({a.cb, std::move(e)});
        if (out.back().second.finished) {
          it = active_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto& [cb, e] : out) cb(e);
  }

  void loop() {
    for (;;) {
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !active_.empty(); });
        if (stop_ && active_.empty()) return;
      }
      step();
      std::this_thread::sleep_for(std::chrono::milliseconds(step_ms_));
    }
  }

  const int step_ms_;
  const int max_queued_;
  const int eos_after_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Active> active_;
  std::vector<uint64_t> cancelled_;
  uint64_t next_id_ = 1;
  int cancel_calls_ = 0;
  int64_t aborted_ = 0;
  int64_t finished_ = 0;
  engine::GenerateRequest last_request_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace kiln::server::testing

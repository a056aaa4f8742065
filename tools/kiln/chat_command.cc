// `kiln chat`: a multi-turn conversation with a model in the terminal, the way `llama-cli -cnv`
// and `ollama run` work. The whole history is rendered with the model's own chat template every
// turn (the prefix cache makes re-reading the earlier turns cheap), replies stream as they are
// generated, Ctrl-C stops a reply without leaving, /reset starts over, /exit or Ctrl-D leaves.
// Ctrl-C before the first prompt (while the model loads) ends the program with status 130.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "chat_line_reader.h"
#include "commands.h"
#include "default_model.h"
#include "kiln/base/error.h"
#include "kiln/base/log.h"
#include "kiln/engine/engine.h"
#include "kiln/engine/runtime.h"
#include "kiln/model/chat_template.h"
#include "kiln/model/model_files.h"
#include "kiln/model/tokenizer.h"
#include "local_model_flags.h"
#include "progress_bar.h"
#include "speculative_flags.h"

namespace kiln::cli {
namespace {

struct ChatArgs {
  LocalModelFlags local;
  SpeculativeFlags speculative;
  SamplingFlags sampling;
  std::string system;
  int n_predict = 0;  // 0: until end of turn or the context is full
  bool ignore_eos = false;
  bool stats = false;
};

constexpr const char* kHelp =
    "  /reset  start a new conversation (the system prompt stays)\n"
    "  /exit   leave (also /quit or Ctrl-D)\n"
    "  Ctrl-C  stops a reply; a line ending in \\ continues on the next\n";

// One reply: streams the text to stdout, returns it and how it ended. Ctrl-C (chat_interrupted)
// cancels it; the engine then finishes it with finish reason "abort" and no error.
struct Reply {
  std::string text;
  engine::RequestEvent last;
  double seconds = 0;  // submit to the last token
};

Reply generate_reply(engine::Engine& eng, engine::GenerateRequest req) {
  std::mutex mu;
  std::condition_variable cv;
  Reply reply;
  bool done = false;
  const uint64_t id = eng.submit(std::move(req), [&](const engine::RequestEvent& ev) {
    std::fwrite(ev.text_delta.data(), 1, ev.text_delta.size(), stdout);
    std::fflush(stdout);
    std::lock_guard<std::mutex> lock(mu);
    reply.text += ev.text_delta;
    if (ev.finished) {
      reply.last = ev;
      done = true;
      cv.notify_all();
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu);
  bool cancelled = false;
  // The signal handler can only set a flag, so the wait polls it.
  while (!cv.wait_for(lock, std::chrono::milliseconds(20), [&] { return done; })) {
    if (!cancelled && chat_interrupted()) {
      eng.cancel(id);
      cancelled = true;
    }
  }
  reply.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return reply;
}

// The conversation rendered for the model, with the oldest exchanges dropped until the prompt
// and `reserve` reply tokens fit in `context`. Returns the prompt's ids (empty when even the
// last user message alone does not fit) and how many exchanges it dropped from `history`.
std::vector<int32_t> fit_prompt(const model::ChatTemplate& tmpl, const model::Tokenizer& tok,
                                std::vector<model::ChatMessage>& history, int64_t context,
                                int64_t reserve, int& dropped) {
  dropped = 0;
  const size_t first = !history.empty() && history[0].role == "system" ? 1 : 0;
  for (;;) {
    std::string text = model::apply_chat_template(tmpl, history, true);
    std::vector<int32_t> ids = tok.encode(text, /*add_special=*/true, /*parse_special=*/true);
    if (static_cast<int64_t>(ids.size()) + reserve <= context) return ids;
    // history ends with the new user message; an older exchange is a user and an assistant turn.
    if (history.size() < first + 3) return {};
    history.erase(history.begin() + static_cast<std::ptrdiff_t>(first),
                  history.begin() + static_cast<std::ptrdiff_t>(first + 2));
    ++dropped;
  }
}

int run_chat(const ChatArgs& a) {
  install_load_interrupt_handler();
  set_log_level(a.local.log_level);
  // Decided before the weights load, so a model kiln cannot chat with fails at once.
  const std::string model_path = model_or_default(a.local.model);
  const model::ChatTemplate tmpl =
      model::detect_chat_template(model::read_chat_template(model_path));
  ProgressBar bar;
  engine::SpeculativeConfig speculative = speculative_config(a.speculative);
  engine::RuntimeOptions opts = runtime_options(a.local);
  add_verify_plans(a.speculative, opts);
  opts.progress = [&](const char* stage, int64_t done, int64_t total) {
    bar.update(stage, done, total);
  };
  engine::Runtime rt(opts);
  engine::SpeculativeResources draft_resources;
  const std::unique_ptr<engine::Runtime> draft =
      load_draft_model(a.speculative, opts, rt, draft_resources);
  const model::Tokenizer& tok = rt.tokenizer();
  engine::EngineConfig cfg;
  cfg.speculative = speculative;
  engine::Engine eng(rt.executor(), rt.kv_pool(), tok, cfg, draft_resources);
  const int64_t context = rt.info().context_length;
  const int64_t reserve =
      a.n_predict > 0 ? a.n_predict : std::min<int64_t>(512, std::max<int64_t>(1, context / 4));
  KILN_CHECK(reserve < context, "--n-predict {} leaves no room for a prompt in the context of {}",
             a.n_predict, context);

  std::vector<model::ChatMessage> history;
  if (!a.system.empty()) history.push_back({"system", a.system});
  const size_t kept = history.size();
  std::printf("kiln chat: %s (%s template), context %lld tokens. Type /help for commands.\n",
              rt.info().name.c_str(), std::string(model::chat_template_name(tmpl.kind)).c_str(),
              static_cast<long long>(context));
  install_chat_interrupt_handler();
  ChatLineReader reader(STDIN_FILENO);
  for (;;) {
    std::printf("> ");
    std::fflush(stdout);
    std::string line;
    const ChatLineReader::Result got = reader.read(line);
    if (got == ChatLineReader::Result::kEnd) {
      // End of input (Ctrl-D on an empty line, or the end of a piped script) leaves like /exit:
      // the newline ends the prompt's line, so a shell prompt starts on its own.
      std::printf("\n");
      break;
    }
    if (got == ChatLineReader::Result::kInterrupted) {
      std::printf("\n(Ctrl-D or /exit leaves)\n");
      continue;
    }
    if (line.find_first_not_of(" \t\r\n") == std::string::npos) continue;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      history.resize(kept);
      std::printf("(new conversation)\n");
      continue;
    }
    if (line == "/help" || line.front() == '/') {
      std::printf("%s", kHelp);
      continue;
    }
    history.push_back({"user", line});
    int dropped = 0;
    engine::GenerateRequest req;
    req.prompt_ids = fit_prompt(tmpl, tok, history, context, reserve, dropped);
    if (req.prompt_ids.empty()) {
      std::printf("(that message does not fit the context of %lld tokens; not sent)\n",
                  static_cast<long long>(context));
      history.pop_back();
      continue;
    }
    if (dropped > 0) std::printf("(the %d oldest exchange(s) no longer fit; dropped)\n", dropped);
    const int64_t room = context - static_cast<int64_t>(req.prompt_ids.size());
    req.stop.max_new_tokens = static_cast<int>(a.n_predict > 0 ? a.n_predict : room);
    req.stop.ignore_eos = a.ignore_eos;
    req.sampling = sampling_params(a.sampling);
    Reply reply = generate_reply(eng, std::move(req));
    const bool stopped = chat_interrupted();
    clear_chat_interrupt();
    if (!reply.last.error.empty()) {
      std::printf("\n");
      std::fflush(stdout);
      std::fprintf(stderr, "kiln chat: error: %s\n", reply.last.error.c_str());
      history.pop_back();
      continue;
    }
    // A stopped reply stays in the history as far as it got: it is what the user saw.
    history.push_back({"assistant", reply.text});
    std::fputs(stopped ? "\n(stopped)\n" : "\n", stdout);
    if (a.stats) {
      std::fflush(stdout);
      std::fprintf(stderr, "[prompt: %d tokens (%d cached) | reply: %d tokens in %.2f s]\n",
                   reply.last.prompt_tokens, reply.last.cached_tokens, reply.last.completion_tokens,
                   reply.seconds);
    }
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

void add_chat_command(CLI::App& app) {
  auto args = std::make_shared<ChatArgs>();
  CLI::App* cmd = app.add_subcommand(
      "chat", "Talk with a model in the terminal (multi-turn, in the model's chat template)");
  add_local_model_flags(cmd, args->local);
  add_speculative_flags(cmd, args->speculative);
  add_sampling_flags(cmd, args->sampling);
  cmd->add_option("-s,--system", args->system, "System prompt");
  cmd->add_option("-n,--n-predict", args->n_predict,
                  "Most tokens per reply (default: until the end of the turn)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_flag("--ignore-eos", args->ignore_eos,
                "Keep generating past the end of the turn (until -n or the context)");
  cmd->add_flag("--stats", args->stats,
                "After each reply, print its prompt tokens (and how many came from the prefix "
                "cache), reply tokens and time to stderr");
  cmd->callback([args] { std::exit(run_chat(*args)); });
}

}  // namespace kiln::cli

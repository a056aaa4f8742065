// What the HTTP layer needs from the rest of kiln, as two small interfaces: something that runs
// generation requests (the engine) and something that turns text into token ids and back (the
// model's tokenizer and chat template). The server only talks to these, so its routes, parsing
// and streaming can be tested against a fake model without loading weights.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/engine/engine_config.h"  // EngineStats, QueueFull
#include "kiln/engine/request.h"
#include "kiln/model/chat_message.h"
#include "kiln/model/tool_call_format.h"

namespace kiln::server {

using model::ChatMessage;
using model::ToolCallFormat;

class GenerationBackend {
 public:
  virtual ~GenerationBackend() = default;
  // Same contract as engine::Engine::submit: exactly one finished event per request; throws
  // kiln::Error for an invalid request and engine::QueueFull when the queue is full.
  virtual uint64_t submit(engine::GenerateRequest request, engine::EventCallback on_event) = 0;
  virtual void cancel(uint64_t request_id) = 0;
  virtual bool flush_cache() = 0;
  virtual engine::EngineStats stats() const = 0;
};

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  // add_special: prepend BOS (and whatever else the model adds to a plain prompt).
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special) const = 0;
  virtual std::string decode(const std::vector<int32_t>& ids, bool skip_special) const = 0;
  // The prompt text for a chat: the model's chat template applied to the messages, ending with the
  // opening of the assistant's turn. Throws kiln::Error when the model has no chat template.
  // Rendering and tokenizing are separate so the server can bound the text's length before
  // paying for its tokenization (request_builder.h).
  // `tools`: the request's tool definitions as `| tojson` writes them (none: empty).
  virtual std::string render_chat(const std::vector<ChatMessage>& messages,
                                  const std::vector<std::string>& tools) const = 0;
  // Why the model's chat template cannot take tools (naming its format), empty when it can.
  virtual std::string tools_refusal() const = 0;
  virtual ToolCallFormat tool_call_format() const = 0;
  // The prompt ids for a chat: its rendered text with the model's special tokens.
  std::vector<int32_t> encode_chat(const std::vector<ChatMessage>& messages) const {
    return encode(render_chat(messages, {}), /*add_special=*/true);
  }
  virtual int64_t vocab_size() const = 0;
  // The most bytes of text one token can stand for (0: unknown). encode() of a text of B bytes
  // gives at least B / max_token_bytes() tokens, which lets the server refuse a prompt that
  // cannot fit the context without tokenizing it. Must not be an underestimate.
  virtual size_t max_token_bytes() const { return 0; }
  // The special tokens' text and the chat template's source, for /tokenizer_info (empty:
  // the model has none).
  struct Specials {
    std::string bos, eos, pad, chat_template;
  };
  virtual Specials specials() const = 0;
};

// Static facts about the served model (for /get_model_info, /v1/models, limits).
struct ModelCard {
  std::string id;    // the name clients pass as "model"
  std::string path;  // the file it was loaded from
  std::string architecture;
  int64_t context_length = 0;
  int64_t vocab_size = 0;
  int64_t n_params = 0;
  bool is_generation = true;  // false: an embedding model (it only embeds)
};

}  // namespace kiln::server

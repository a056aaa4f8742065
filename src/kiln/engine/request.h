// A generation request as the engine sees it (already tokenized and validated), and the
// events it produces. The server translates HTTP bodies into these.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::engine {

class JsonSchema;
struct Grammar;

struct SamplingParams {
  double temperature = 1.0;  // 0: greedy
  int top_k = -1;            // -1 or 0: off
  double top_p = 1.0;
  double min_p = 0.0;
  double repetition_penalty = 1.0;  // >1 discourages tokens already in prompt or output
  double frequency_penalty = 0.0;   // subtracts count * penalty
  double presence_penalty = 0.0;    // subtracts penalty once a token appeared in the output
  std::optional<uint64_t> seed;     // per-request RNG seed; none: from the engine's RNG
  // (token id, bias) pairs added to the logits after the penalties, before banned tokens and
  // temperature (OpenAI's logit_bias: -100 effectively bans a token, 100 all but forces it).
  std::vector<std::pair<int32_t, float>> logit_bias;
  // Constrained decoding: when set, every step only allows tokens that keep the output a
  // prefix of a JSON value this schema accepts, and end of sequence once the value is complete
  // (json_token_mask.h). Shared, immutable: the n sequences of a request use one compiled copy.
  std::shared_ptr<const JsonSchema> json_schema;
  // With json_schema: the constraint waits until the output ends with one of these texts,
  // applies to the value that follows (whitespace may precede it), and lifts once the value is
  // complete, to start again at the next occurrence (a tool call's JSON after "<tool_call>").
  // End of sequence is allowed except inside a value. Empty: the whole output is one value.
  std::vector<std::string> json_after;
  // Without json_after: whitespace may precede the value (at most 32 bytes, as after a
  // marker), e.g. the space Mistral Large writes after a forced [TOOL_CALLS].
  bool json_leading_space = false;
  // Constrained decoding by a grammar (llama.cpp's GBNF `grammar`, SGLang's `ebnf` and `regex`;
  // grammar/grammar_cache.h): every step only allows tokens that keep the output a prefix of a
  // sentence, and end of sequence once it is one. At most one of json_schema and grammar.
  std::shared_ptr<const Grammar> grammar;
  bool is_greedy() const { return temperature <= 0.0 || top_k == 1; }
};

// Throws kiln::Error with a message naming the parameter when out of range.
void validate(const SamplingParams& p);

struct StopConditions {
  int max_new_tokens = 128;
  int min_new_tokens = 0;
  std::vector<std::string> stop_strings;  // output is truncated before the match
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
};

// An embedding request's output: instead of generating, the request returns one final-norm
// hidden state in its final event: its last prompt row's, or the mean of every prompt row's
// (summed in double in row order as the scheduler gets them, the same bits as
// model::pool_hidden's mean over all rows, without keeping the rows). Its prompt rows share
// steps with generation rows (scheduler.h).
enum class HiddenOutput : uint8_t { kNone, kLastRow, kMean };

struct GenerateRequest {
  std::vector<int32_t> prompt_ids;
  SamplingParams sampling;
  StopConditions stop;
  bool skip_special_tokens = true;
  int logprobs = -1;  // -1: none; 0: chosen token's logprob; k>0: also the top k alternatives
  // Prompt scoring: -1 none; k in [0, prompt size]: the logprob of each prompt token from
  // position max(k, 1) on (position 0 has no context to be predicted from), with max(logprobs,
  // 0) alternatives each. With max_new_tokens 0 the request only scores its prompt.
  int prompt_logprobs_from = -1;
  // Scheduling priority: a larger value is admitted first and preempted last (SGLang's
  // convention); a waiting request's wait is bounded whatever its priority (schedule_policy.h).
  int32_t priority = 0;
  // Not kNone: an embedding request (max_new_tokens 0, no prompt scoring).
  HiddenOutput hidden = HiddenOutput::kNone;
};

enum class FinishReason { None, Stop, Length, Abort };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "abort"

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // alternatives, most likely first
};

// Emitted on the scheduler thread: keep the callback short (queue it, don't block).
struct RequestEvent {
  uint64_t request_id = 0;
  std::vector<int32_t> new_tokens;  // tokens accepted since the last event
  std::string text_delta;           // UTF-8-complete text for them (stop strings withheld)
  std::vector<TokenLogprob> logprobs;
  // The prompt's scores (positions max(prompt_logprobs_from, 1).. in order), once, in the
  // first event after the whole prompt has been scored.
  std::vector<TokenLogprob> prompt_logprobs;
  bool finished = false;
  FinishReason finish_reason = FinishReason::None;
  std::string matched_stop;  // the stop string, if one ended the request
  int32_t matched_stop_token = -1;
  std::string error;  // set with finish_reason Abort when the engine failed it
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;  // prompt tokens served from the prefix cache
  // An embedding request's final event: its hidden state [hidden_dim] (HiddenOutput).
  std::vector<float> hidden;
  int64_t hidden_dim = 0;
  // Speculative decoding (only when the engine speculates; -1 otherwise): decode steps this
  // request took part in, tokens proposed for it and accepted.
  int spec_verify_ct = -1;
  int spec_proposed = 0;
  int spec_accepted = 0;
};

using EventCallback = std::function<void(const RequestEvent&)>;

}  // namespace kiln::engine

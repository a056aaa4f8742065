// TokenEmitter on its own: a step's output rows for one request, built by hand (no model, no
// scheduler). The order under test: the JSON constraint masks the row, the sampler picks from
// what is left, the constraint follows the token, the token joins the request, the stop checker
// sees it, and the event carries it; for plain rows and verify rows alike.
#include "kiln/engine/token_emitter.h"

#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "engine/fake_model.h"
#include "kiln/engine/json/json_schema.h"

namespace kiln::engine {
namespace {

using testing::FakeTokenizer;

constexpr int64_t kVocab = 64;
constexpr size_t kMaskBytes = size_t{1} << 20;
const std::vector<int32_t> kEog = {FakeTokenizer::kEos, FakeTokenizer::kEot};

int32_t L(char c) { return FakeTokenizer::letter(c); }

std::shared_ptr<const JsonSchema> boolean_or_null() {
  return JsonSchema::compile(nlohmann::json::parse(R"({"type": ["boolean", "null"]})"));
}

GenerateRequest greedy_request(int max_new = 16) {
  GenerateRequest r;
  r.prompt_ids = {L('a'), L('b')};
  r.sampling.temperature = 0.0;
  r.stop.max_new_tokens = max_new;
  return r;
}

// Logits rows whose largest entry is `best` and second largest `second` (others 0).
void add_row(StepOutput& out, int32_t best, int32_t second = -1) {
  const size_t at = out.logits.size();
  out.logits.resize(at + kVocab, 0.0f);
  out.logits[at + static_cast<size_t>(best)] = 10.0f;
  if (second >= 0) out.logits[at + static_cast<size_t>(second)] = 5.0f;
  out.vocab = kVocab;
}

struct Fixture {
  FakeTokenizer tok{kVocab};
  ConstraintMasks masks{tok, kVocab, kMaskBytes};
  TokenEmitter emitter{masks, tok, kVocab};
  std::vector<RequestEvent> delivered;

  std::unique_ptr<Sequence> sequence(GenerateRequest r) {
    return std::make_unique<Sequence>(
        7, 0, std::move(r), [this](const RequestEvent& e) { delivered.push_back(e); }, 1, tok,
        kEog);
  }
};

TEST(TokenEmitter, APlainRowIsMaskedThenSampledThenFedPushedStoppedAndEmitted) {
  Fixture f;
  GenerateRequest r = greedy_request();
  r.sampling.json_schema = boolean_or_null();
  auto seq = f.sequence(r);
  // The row prefers 'x', which no value starts with; the constraint leaves 'n' the best.
  StepOutput out;
  add_row(out, L('x'), L('n'));
  RequestEvent ev;
  EmittedTokens got = f.emitter.take_tokens(*seq, out, /*greedy=*/false, 0, {}, ev);
  EXPECT_EQ(got.emitted, 1);
  EXPECT_FALSE(got.finished || got.failed);
  EXPECT_EQ(ev.new_tokens, std::vector<int32_t>{L('n')});
  EXPECT_EQ(ev.text_delta, "n");
  EXPECT_EQ(seq->tokens.back(), L('n'));  // pushed
  EXPECT_EQ(seq->generated(), 1);
  // The constraint followed the token: after "n" only "u" continues the value.
  StepOutput next;
  add_row(next, L('t'), L('u'));
  RequestEvent ev2;
  got = f.emitter.take_tokens(*seq, next, false, 0, {}, ev2);
  EXPECT_EQ(ev2.new_tokens, std::vector<int32_t>{L('u')});
  // Emitted: the callback sees the request's counts with the event.
  TokenEmitter::deliver(*seq, ev2, /*speculating=*/false);
  ASSERT_EQ(f.delivered.size(), 1u);
  EXPECT_EQ(f.delivered[0].request_id, 7u);
  EXPECT_EQ(f.delivered[0].completion_tokens, 2);
  EXPECT_EQ(f.delivered[0].prompt_tokens, 2);
  EXPECT_EQ(f.delivered[0].spec_verify_ct, -1);
}

TEST(TokenEmitter, TheStopCheckerSeesTheTokenAfterItJoinsTheRequest) {
  Fixture f;
  GenerateRequest r = greedy_request();
  r.stop.stop_token_ids = {L('q')};
  auto seq = f.sequence(r);
  StepOutput out;
  out.greedy_ids = {L('q')};
  RequestEvent ev;
  const EmittedTokens got = f.emitter.take_tokens(*seq, out, /*greedy=*/true, 0, {}, ev);
  EXPECT_TRUE(got.finished);
  EXPECT_EQ(ev.finish_reason, FinishReason::Stop);
  EXPECT_EQ(ev.matched_stop_token, L('q'));
  EXPECT_EQ(ev.new_tokens, std::vector<int32_t>{L('q')});  // the token is in the event...
  EXPECT_EQ(ev.text_delta, "");                            // ...its text is not
  EXPECT_EQ(seq->generated(), 1);
}

TEST(TokenEmitter, ACompleteValueAllowsOnlyItsEnd) {
  Fixture f;
  GenerateRequest r = greedy_request();
  r.sampling.json_schema = boolean_or_null();
  auto seq = f.sequence(r);
  for (char c : std::string("null")) {
    StepOutput out;
    add_row(out, L(c));
    RequestEvent ev;
    f.emitter.take_tokens(*seq, out, false, 0, {}, ev);
  }
  // The row prefers 'a'; once the value is complete only end of generation is allowed.
  StepOutput out;
  add_row(out, L('a'));
  RequestEvent ev;
  const EmittedTokens got = f.emitter.take_tokens(*seq, out, false, 0, {}, ev);
  EXPECT_TRUE(got.finished);
  EXPECT_EQ(ev.finish_reason, FinishReason::Stop);
  ASSERT_EQ(ev.new_tokens.size(), 1u);
  EXPECT_TRUE(f.tok.is_end_of_generation(ev.new_tokens[0]));
}

TEST(TokenEmitter, VerifyRowsAcceptProposalsUntilTheFirstDisagreement) {
  Fixture f;
  auto seq = f.sequence(greedy_request());
  // Row j's token is the model's after proposal j - 1: 'c' and 'd' agree, 'x' replaces 'e'.
  StepOutput out;
  out.greedy_ids = {L('z'), L('c'), L('d'), L('x'), L('y')};
  const std::vector<int32_t> proposals = {L('c'), L('d'), L('e'), L('f')};
  RequestEvent ev;
  const EmittedTokens got = f.emitter.take_tokens(*seq, out, true, /*first_row=*/1, proposals, ev);
  EXPECT_EQ(got.accepted, 2);
  EXPECT_EQ(got.emitted, 3);
  EXPECT_EQ(ev.new_tokens, (std::vector<int32_t>{L('c'), L('d'), L('x')}));
  EXPECT_EQ(ev.text_delta, "cdx");
  EXPECT_EQ(seq->generated(), 3);
}

TEST(TokenEmitter, AllProposalsAcceptedGiveOneTokenMore) {
  Fixture f;
  auto seq = f.sequence(greedy_request());
  StepOutput out;
  out.greedy_ids = {L('c'), L('d'), L('e')};
  RequestEvent ev;
  const EmittedTokens got =
      f.emitter.take_tokens(*seq, out, true, 0, std::vector<int32_t>{L('c'), L('d')}, ev);
  EXPECT_EQ(got.accepted, 2);
  EXPECT_EQ(got.emitted, 3);
}

TEST(TokenEmitter, AStopInsideTheVerifyRowsEndsThemThere) {
  Fixture f;
  GenerateRequest r = greedy_request();
  r.stop.stop_token_ids = {L('d')};
  auto seq = f.sequence(r);
  StepOutput out;
  out.greedy_ids = {L('c'), L('d'), L('e')};
  RequestEvent ev;
  const EmittedTokens got =
      f.emitter.take_tokens(*seq, out, true, 0, std::vector<int32_t>{L('c'), L('d')}, ev);
  EXPECT_TRUE(got.finished);
  EXPECT_EQ(got.emitted, 2);
  EXPECT_EQ(got.accepted, 1);  // 'd' stopped the request before its acceptance counted
  EXPECT_EQ(ev.text_delta, "c");
}

TEST(TokenEmitter, VerifyRowsAreMaskedAlongTheProposals) {
  Fixture f;
  GenerateRequest r = greedy_request();
  r.sampling.json_schema = boolean_or_null();
  auto seq = f.sequence(r);
  // Every row prefers 'x'; masked along the proposals "tru", each row's best allowed token is
  // the next letter of "true", so every proposal is kept and the last row adds 'e'.
  StepOutput out;
  add_row(out, L('x'), L('t'));
  add_row(out, L('x'), L('r'));
  add_row(out, L('x'), L('u'));
  add_row(out, L('x'), L('e'));
  RequestEvent ev;
  const EmittedTokens got =
      f.emitter.take_tokens(*seq, out, false, 0, std::vector<int32_t>{L('t'), L('r'), L('u')}, ev);
  EXPECT_FALSE(got.failed);
  EXPECT_EQ(got.accepted, 3);
  EXPECT_EQ(ev.text_delta, "true");
  EXPECT_TRUE(seq->json.matcher().complete());
}

TEST(TokenEmitter, AFailureBecomesAnAbortEventWithoutTheStepsTokens) {
  Fixture f;
  auto seq = f.sequence(greedy_request());
  StepOutput out;
  out.greedy_ids = {L('c'), 9999};  // the second row's id is outside the vocabulary
  RequestEvent ev;
  ev.prompt_logprobs.push_back({});
  const EmittedTokens got =
      f.emitter.take_tokens(*seq, out, true, 0, std::vector<int32_t>{L('c')}, ev);
  EXPECT_TRUE(got.failed);
  EXPECT_EQ(ev.finish_reason, FinishReason::Abort);
  EXPECT_TRUE(ev.error.starts_with("sampling failed: ")) << ev.error;
  EXPECT_TRUE(ev.new_tokens.empty());
  EXPECT_EQ(ev.prompt_logprobs.size(), 1u);  // what the event carried before stays
}

TEST(TokenEmitter, DeliveryFillsTheSpeculationCountsAndSurvivesAThrowingCallback) {
  Fixture f;
  FakeTokenizer tok(kVocab);
  Sequence seq(
      3, 0, greedy_request(), [](const RequestEvent&) { throw std::runtime_error("x"); }, 1, tok,
      kEog);
  seq.spec.verify_ct = 4;
  seq.spec.proposed = 9;
  seq.spec.accepted = 5;
  RequestEvent ev;
  EXPECT_NO_THROW(TokenEmitter::deliver(seq, ev, /*speculating=*/true));
  EXPECT_EQ(ev.spec_verify_ct, 4);
  EXPECT_EQ(ev.spec_proposed, 9);
  EXPECT_EQ(ev.spec_accepted, 5);
}

}  // namespace
}  // namespace kiln::engine

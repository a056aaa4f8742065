// The admission budget and the KV pages it governs, on their own (a KV pool, hand-built
// sequences, no model): how many prompt tokens and requests a step takes, the page of headroom
// each decoding request keeps, and where a decoding request's next page comes from.
#include "kiln/engine/admission_budget.h"

#include <gtest/gtest.h>

#include "engine/fake_model.h"
#include "kiln/engine/sequence_pages.h"

namespace kiln::engine {
namespace {

using testing::FakeTokenizer;

EngineConfig config() {
  EngineConfig c;
  c.max_prefill_tokens = 2048;
  c.max_prefill_tokens_while_decoding = 256;
  c.max_running_requests = 4;
  return c;
}

TEST(AdmissionBudget, PromptTokensAreCappedWhileRequestsDecode) {
  EXPECT_EQ(AdmissionBudget(config(), 0, 0).prompt_tokens(), 2048);
  EXPECT_EQ(AdmissionBudget(config(), 2, 1).prompt_tokens(), 256);
  EngineConfig uncapped = config();
  uncapped.max_prefill_tokens_while_decoding = 0;
  EXPECT_EQ(AdmissionBudget(uncapped, 2, 1).prompt_tokens(), 2048);
}

TEST(AdmissionBudget, RoomEndsWithThePromptTokensOrTheRunningSlots) {
  AdmissionBudget budget(config(), 2, 0);
  EXPECT_TRUE(budget.has_room());
  budget.admitted();
  EXPECT_TRUE(budget.has_room());
  budget.admitted();  // 4 running: max_running_requests
  EXPECT_FALSE(budget.has_room());
  AdmissionBudget tokens(config(), 0, 0);
  tokens.spend_prompt_tokens(2047);
  EXPECT_TRUE(tokens.has_room());
  tokens.spend_prompt_tokens(1);
  EXPECT_FALSE(tokens.has_room());
}

TEST(AdmissionBudget, EveryDecodingRequestKeepsAPageOfHeadroom) {
  const AdmissionBudget budget(config(), 3, 3);
  EXPECT_EQ(budget.headroom_pages(), 3 * AdmissionBudget::kPagesPerDecoder);
  // 6 free and 2 evictable pages: 5 new pages fit beside 3 of headroom, 6 do not.
  EXPECT_TRUE(budget.pages_fit(5, 6, 2));
  EXPECT_FALSE(budget.pages_fit(6, 6, 2));
  EXPECT_TRUE(AdmissionBudget(config(), 0, 0).pages_fit(8, 6, 2));
}

TEST(AdmissionBudget, ADecodePageIsFreeThenEvictedThenTakenByPreemption) {
  EXPECT_EQ(decode_page_source(1, 0), PageSource::Free);
  EXPECT_EQ(decode_page_source(0, 3), PageSource::EvictCached);
  EXPECT_EQ(decode_page_source(0, 0), PageSource::PreemptLeastProtected);
}

struct Pages {
  KvPool pool{KvPoolConfig{2, 1, 8, 4, 8}};  // 8 pages of 4 tokens
  FakeTokenizer tok;
  EngineStats stats;
  std::vector<std::unique_ptr<Sequence>> owned;
  Sequence& add(int prompt_len) {
    GenerateRequest r;
    for (int i = 0; i < prompt_len; ++i) r.prompt_ids.push_back(3 + i);
    r.stop.max_new_tokens = 16;
    owned.push_back(std::make_unique<Sequence>(owned.size() + 1, owned.size(), std::move(r),
                                               nullptr, 1, tok, std::vector<int32_t>{1}));
    return *owned.back();
  }
};

TEST(SequencePages, AdmissionReservesEveryPromptPageAndRefusesIntoTheHeadroom) {
  Pages p;
  SequencePages pages(p.pool, /*prefix_cache=*/false);
  Sequence& a = p.add(16);  // 4 pages
  ASSERT_TRUE(pages.reserve(a, AdmissionBudget(config(), 0, 0), p.stats));
  EXPECT_EQ(a.pages.size(), 4u);
  EXPECT_EQ(a.state, Sequence::State::Prefilling);
  a.state = Sequence::State::Decoding;
  a.n_kv = 16;
  // 4 pages left, one of them a's headroom: a 16-token prompt is refused, 12 tokens fit.
  Sequence& b = p.add(16);
  EXPECT_FALSE(pages.reserve(b, AdmissionBudget(config(), 1, 1), p.stats));
  EXPECT_TRUE(b.pages.empty());
  Sequence& c = p.add(12);
  EXPECT_TRUE(pages.reserve(c, AdmissionBudget(config(), 1, 1), p.stats));
  EXPECT_EQ(p.pool.free_pages(), 1);
  // a's next token takes the headroom page; after that the pool is out: someone is preempted.
  EXPECT_TRUE(pages.grow_for_decode(a));
  EXPECT_EQ(a.pages.size(), 5u);
  a.n_kv = 20;
  EXPECT_FALSE(pages.grow_for_decode(a));
  // Preempting c gives its pages back, and a grows again.
  pages.release(c, /*to_cache=*/true);
  EXPECT_EQ(c.state, Sequence::State::Waiting);
  EXPECT_TRUE(pages.grow_for_decode(a));
  pages.release(a, true);
  EXPECT_EQ(p.pool.used_pages(), 0);
}

TEST(SequencePages, ProposalsTakeFreePagesOnlyAndRejectedRowsGiveThemBack) {
  Pages p;
  SequencePages pages(p.pool, /*prefix_cache=*/false);
  Sequence& a = p.add(28);  // 7 of 8 pages
  ASSERT_TRUE(pages.reserve(a, AdmissionBudget(config(), 0, 0), p.stats));
  a.n_kv = 28;
  a.state = Sequence::State::Decoding;
  ASSERT_TRUE(pages.grow_for_decode(a));  // the last page: positions 28..31
  a.spec.draft = {5, 6, 7, 8, 9};         // rows at 29..33: 32 and 33 have no page
  pages.grow_for_proposals(a);
  EXPECT_EQ(a.spec.draft.size(), 3u);
  EXPECT_EQ(p.pool.free_pages(), 0);
  a.spec.draft.clear();
  a.n_kv = 29;  // one token kept: nothing to give back yet
  pages.keep_verified(a);
  EXPECT_EQ(a.pages.size(), 8u);
  pages.release(a, false);
  EXPECT_EQ(p.pool.used_pages(), 0);
}

TEST(SequencePages, ThePrefixCacheServesAndPinsWhatItHolds) {
  Pages p;
  SequencePages pages(p.pool, /*prefix_cache=*/true);
  Sequence& a = p.add(9);
  ASSERT_TRUE(pages.reserve(a, AdmissionBudget(config(), 0, 0), p.stats));
  a.n_kv = 9;
  pages.publish_prefix(a);  // two full pages
  EXPECT_EQ(a.n_cached_pages, 2u);
  Sequence& b = p.add(9);  // the same tokens
  EXPECT_EQ(pages.cached_prefix_tokens(b), 8);
  ASSERT_TRUE(pages.reserve(b, AdmissionBudget(config(), 1, 0), p.stats));
  EXPECT_EQ(b.n_kv, 8);
  EXPECT_EQ(b.cached_tokens, 8);
  EXPECT_EQ(p.stats.prefix_cache_hit_tokens, 8);
  EXPECT_EQ(pages.evictable_pages(), 0);  // both pin them
  pages.release(a, true);
  pages.release(b, true);
  EXPECT_EQ(pages.evictable_pages(), 2);
  pages.flush_cache();
  EXPECT_EQ(p.pool.used_pages(), 0);
}

}  // namespace
}  // namespace kiln::engine

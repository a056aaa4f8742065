// StepBatch::add_sequence, the one way a sequence's rows join a step: positions, K/V slots from
// the block table, and what the executor returns for it.
#include "kiln/engine/step_batch.h"

#include <gtest/gtest.h>

namespace kiln::engine {
namespace {

TEST(StepBatch, AddSequenceWritesRowsAtTheirSlots) {
  StepBatch batch;
  const std::vector<int32_t> pages_a = {7, 2};
  const std::vector<int32_t> pages_b = {5};
  // Positions 3..5 of a (page size 4): the end of page 7, the start of page 2.
  EXPECT_EQ(batch.add_sequence(std::vector<int32_t>{10, 11, 12}, 3, pages_a, 4, true, false), 0);
  EXPECT_EQ(batch.add_sequence(std::vector<int32_t>{20, 21}, 1, pages_b, 4, true, true), 1);
  EXPECT_EQ(batch.token_ids, (std::vector<int32_t>{10, 11, 12, 20, 21}));
  EXPECT_EQ(batch.positions, (std::vector<int32_t>{3, 4, 5, 1, 2}));
  EXPECT_EQ(batch.token_seq, (std::vector<int32_t>{0, 0, 0, 1, 1}));
  EXPECT_EQ(batch.slots,
            (std::vector<int32_t>{7 * 4 + 3, 2 * 4 + 0, 2 * 4 + 1, 5 * 4 + 1, 5 * 4 + 2}));
  ASSERT_EQ(batch.seqs.size(), 2u);
  EXPECT_EQ(batch.seqs[0].pages, pages_a);
  EXPECT_EQ(batch.seqs[0].seq_len, 6);
  EXPECT_FALSE(batch.seqs[0].all_logits);
  EXPECT_EQ(batch.seqs[1].seq_len, 3);
  // a's last row, then every row of b.
  EXPECT_EQ(batch.logit_rows(), 3);
  EXPECT_EQ(batch.logit_row_indices(), (std::vector<int32_t>{2, 3, 4}));
}

}  // namespace
}  // namespace kiln::engine

// Phase 1 of every matmul (matmul.h): where the activation arrays live in the group's scratch,
// and the quantization (or, under the bf16 contract, the rounding to bf16 tiles) of the rows
// into them, in the layout the tile kernels of phase 2 read (ActView, matmul_kernels.h).
// Internal to matmul.cc.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "kiln/kernels/exec_context.h"
#include "kiln/kernels/matmul_kernels.h"
#include "kiln/kernels/packed_weight.h"

namespace kiln::kernels {

inline size_t align64(size_t n) { return (n + 63) / 64 * 64; }

// The scratch's array of T at byte offset `at` (act_scratch's offsets).
template <class T>
T* scratch_array(void* scratch, size_t at) {
  return static_cast<T*>(static_cast<void*>(static_cast<uint8_t*>(scratch) + at));
}

// Every matmul's scratch (float weights' too) starts with the counter its threads take column
// groups from (GroupQueue), on a cache line of its own: every thread writes it.
constexpr size_t kQueueBytes = 64;

// Where each activation array lives in the scratch (block-major, see ActView), after the queue
// counter, including one zero-point correction array per zero point among the weight's segments.
struct ActScratch {
  struct Correction {
    int slot, zero_point, sub_block;
    size_t offset;
  };
  size_t q, d, s16, s32, ds, end;
  size_t xb;  // the bf16 contract's rows (ActView::xb), where the host can run it; else 0
  Correction corrections[kZeroPointSlots];
  int n_corrections;
};

// The layout for a weight and m rows; `end` is the scratch bytes matmul needs.
ActScratch act_scratch(const PackedWeight& w, int64_t m);

// The counter at the start of the scratch (kQueueBytes).
inline std::atomic_ref<int32_t> group_counter(void* scratch) {
  return std::atomic_ref<int32_t>(*static_cast<int32_t*>(scratch));
}

// Whether the AVX2 many-row tiles (chunked_group) compute m rows: from 2 rows, for every weight
// type. They expand each group once for all rows (in the first slab's pass, at the cost of
// stores beside its dot products) and sum vpmaddubsw pairs in int16; measured against the 8-row
// tiles at 2 rows (old and new code alternating call by call, 2 threads): Q4_K 8B/1B shapes 1.05x
// and 1.24x (1.34x with one thread), Q6_K 1.07x, Q5_0 1.06x; Q8_0 1.3x (bench/matmul_bench,
// alternating binaries). At 1 row the
// decode tiles stay: the step is bound by memory there, and the many-row pass measured 0.95-1.18x
// by type, its stores of the expansion then read by no other slab. One rule for every weight,
// so every segment of a merged weight reads one activation layout.
bool many_row_tiles(int64_t m);

// Whether AMX tiles compute m rows: from kAmxMinRows rows where amx_active().
bool amx_tiles(int64_t m);

// Phase 1: quantize this thread's share of the rows (under the bf16 contract, round them to A
// tiles), reset the group counter, then wait for the group. Returns the view every thread's
// tile kernels read.
ActView prepare_acts(const PackedWeight& w, const float* x, int64_t m, void* scratch,
                     const ExecContext& ctx);

}  // namespace kiln::kernels

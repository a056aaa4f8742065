// The AMX tile configuration (LDTILECFG's 64-byte operand) and its load, shared by the AMX
// kernels (matmul_amx.cc) and their benchmark loops (bench/contract_ceiling_amx.h). Load it only
// where base/amx.h says AMX is usable.
#pragma once
#include <cstdint>

namespace kiln::kernels {

// Palette 1: bytes per row and rows of each of the 8 tile registers (zero: unused).
struct TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// LDTILECFG with the whole 64 bytes as its operand (GCC's _tile_loadconfig names only the first
// 8, so the compiler may drop the stores of the rest). The assembler takes the instruction
// whatever the compiler's ISA flags.
inline void load_tile_config(const TileConfig& c) { __asm__ volatile("ldtilecfg %0" ::"m"(c)); }

// The kernels' configurations. A thread keeps the last one it loaded (one per thread, shared by
// every translation unit: an inline function's thread_local), so a kernel reloads only when
// the thread last ran the other kind.
enum class TileConfigId : uint8_t { None, Int8, Bf16 };
inline void use_tile_config(TileConfigId id, const TileConfig& c) {
  thread_local TileConfigId current = TileConfigId::None;
  if (current == id) return;
  load_tile_config(c);
  current = id;
}

}  // namespace kiln::kernels

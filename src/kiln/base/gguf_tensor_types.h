// The tensor types a GGUF file can hold (ggml_type ids), kiln-supported or not, with their block
// geometry: the one table of GGUF type facts. kiln's own element types (dtype.h) and quantized
// formats (kernels/quant_format.h) take their names and block sizes from it. The reader needs
// every type's geometry to bounds-check a file's tensor data even when kiln cannot compute with
// that type: an iq2_xs tensor still occupies bytes that must not overlap its neighbours.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

struct GgufTensorType {
  uint32_t id;            // ggml_type id as stored in the file
  std::string_view name;  // "q4_k", "iq2_xs", ... (also kiln's text-IR name of the type)
  int block_size;         // elements per block
  int block_bytes;        // bytes per block
};

// Facts of the ggml block structs. Ids 4, 5 (removed q4_2/q4_3) and 31-33 (removed interleaved
// q4_0 variants) are no longer valid in files.
inline constexpr GgufTensorType kGgufTensorTypes[] = {
    {0, "f32", 1, 4},         {1, "f16", 1, 2},         {2, "q4_0", 32, 18},
    {3, "q4_1", 32, 20},      {6, "q5_0", 32, 22},      {7, "q5_1", 32, 24},
    {8, "q8_0", 32, 34},      {9, "q8_1", 32, 36},      {10, "q2_k", 256, 84},
    {11, "q3_k", 256, 110},   {12, "q4_k", 256, 144},   {13, "q5_k", 256, 176},
    {14, "q6_k", 256, 210},   {15, "q8_k", 256, 292},   {16, "iq2_xxs", 256, 66},
    {17, "iq2_xs", 256, 74},  {18, "iq3_xxs", 256, 98}, {19, "iq1_s", 256, 50},
    {20, "iq4_nl", 32, 18},   {21, "iq3_s", 256, 110},  {22, "iq2_s", 256, 82},
    {23, "iq4_xs", 256, 136}, {24, "i8", 1, 1},         {25, "i16", 1, 2},
    {26, "i32", 1, 4},        {27, "i64", 1, 8},        {28, "f64", 1, 8},
    {29, "iq1_m", 256, 56},   {30, "bf16", 1, 2},       {34, "tq1_0", 256, 54},
    {35, "tq2_0", 256, 66},   {39, "mxfp4", 32, 17},    {40, "nvfp4", 64, 36},
    {41, "q1_0", 128, 18},
};

// The type with this id, or null when the id is not a ggml type kiln knows (a file written by a
// newer ggml, or corrupt).
constexpr const GgufTensorType* find_gguf_tensor_type(uint32_t id) {
  for (const GgufTensorType& t : kGgufTensorTypes)
    if (t.id == id) return &t;
  return nullptr;
}

// "iq2_xs", or "type 99" for an unknown id.
std::string gguf_tensor_type_name(uint32_t id);

}  // namespace kiln

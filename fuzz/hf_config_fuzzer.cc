// Hugging Face config.json documents through model_config_from_hf.
#include "fuzz_support.h"
#include "kiln/model/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto config = kiln::fuzz::parse_json(data, size);
  if (!config) return 0;
  kiln::fuzz::refusing_bad_input([&] { kiln::model::model_config_from_hf(*config); });
  return 0;
}

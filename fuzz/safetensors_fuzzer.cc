// safetensors files from bytes: the header reader and every tensor it lists.
#include "fuzz_support.h"
#include "kiln/model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::refusing_bad_input([&] {
    auto file = kiln::model::SafetensorsFile::from_bytes(data, size, nullptr, "fuzz.safetensors");
    for (const auto& info : file->tensors()) {
      kiln::Tensor t = file->tensor(info.name);
      // Touch both ends so that ASan checks the bounds the reader promised.
      const auto* bytes = static_cast<const volatile uint8_t*>(t.data());
      if (t.nbytes() > 0) (void)(bytes[0] + bytes[t.nbytes() - 1]);
    }
  });
  return 0;
}

#include "kiln/engine/token_text.h"

#include "kiln/model/incremental_decoder.h"

namespace kiln::engine {
namespace {

class DecoderStream : public TextStream {
 public:
  explicit DecoderStream(model::IncrementalDecoder::AppendToken append)
      : decoder_(std::move(append)) {}
  std::string push(int32_t token) override { return decoder_.push(token); }
  std::string finish() override { return decoder_.finish(); }

 private:
  model::IncrementalDecoder decoder_;
};

}  // namespace

std::unique_ptr<TextStream> TokenText::stream(bool skip_special) const {
  return std::make_unique<DecoderStream>([this, skip_special](int32_t id, std::string& out) {
    append_token_text(id, skip_special, out);
  });
}

}  // namespace kiln::engine

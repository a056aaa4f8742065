#include "kiln/engine/request.h"

namespace kiln::engine {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::None:
      return "none";
    case FinishReason::Stop:
      return "stop";
    case FinishReason::Length:
      return "length";
    case FinishReason::Abort:
      return "abort";
  }
  return "unknown";
}

}  // namespace kiln::engine

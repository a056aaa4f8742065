// Chat templates: format detection from the template's text, then rendering of a conversation
// (roles, contents, tool calls and tools from the input) in the detected format, or in one the
// input picks when the text matches none.
#include <fuzzer/FuzzedDataProvider.h>

#include <string>
#include <vector>

#include "fuzz_support.h"
#include "kiln/model/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln::model;
  FuzzedDataProvider in(data, size);
  const std::string text = in.ConsumeRandomLengthString(8192);
  ChatTemplate tmpl;
  bool detected = false;
  kiln::fuzz::refusing_bad_input([&] {
    tmpl = detect_chat_template(text);
    detected = true;
  });
  if (!detected) {
    tmpl.kind = static_cast<ChatTemplateKind>(
        in.ConsumeIntegralInRange<int>(0, static_cast<int>(ChatTemplateKind::kPhi3)));
    tmpl.default_system = in.ConsumeRandomLengthString(64);
    // Any format with any kind: the renderers must refuse or render, never misbehave.
    tmpl.tool_calls =
        static_cast<ToolCallFormat>(in.ConsumeIntegralInRange<size_t>(0, kToolCallFormatCount - 1));
  }
  chat_template_name(tmpl.kind);
  static const char* const kRoles[] = {"system", "user", "assistant", "tool", ""};
  std::vector<ChatMessage> messages(in.ConsumeIntegralInRange<size_t>(0, 8));
  for (auto& m : messages) {
    m.role = kRoles[in.ConsumeIntegralInRange<size_t>(0, std::size(kRoles) - 1)];
    m.content = in.ConsumeRandomLengthString(256);
    if (in.ConsumeBool()) {  // tool calls (the chat-tools path), refused but by some roles
      m.tool_calls.push_back({in.ConsumeRandomLengthString(16), in.ConsumeRandomLengthString(64)});
    }
  }
  std::vector<std::string> tools(in.ConsumeIntegralInRange<size_t>(0, 2));
  for (auto& t : tools) t = in.ConsumeRandomLengthString(64);
  const bool add_generation_prompt = in.ConsumeBool();
  kiln::fuzz::refusing_bad_input(
      [&] { apply_chat_template(tmpl, messages, add_generation_prompt, tools); });
  return 0;
}

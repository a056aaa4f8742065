// One message of a chat, as the server reads it from a request and the chat template renders it
// (one type for both, so that nothing copies it field by field between the layers).
#pragma once
#include <string>
#include <vector>

namespace kiln::model {

// A call the assistant made, as the history carries it back.
struct ChatToolCall {
  std::string name;
  std::string arguments;  // the arguments as the template's `| tojson` writes them (jinja_json.h)
  std::string id = {};    // the call's id as the client sent it (empty: none; Mistral's templates
                          // write it)
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" or (with a tool format) "tool"
  std::string content;
  std::vector<ChatToolCall> tool_calls = {};  // assistant messages only
  std::string tool_call_id = {};              // tool messages: the call answered
};

}  // namespace kiln::model

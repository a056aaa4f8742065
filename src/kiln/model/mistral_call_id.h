// The call ids Mistral's [TOOL_CALLS] templates require: 9 ASCII letters or digits (the
// templates raise on any other length). OpenAI clients send back the ids kiln gave them
// ("call_<24 hex>") or ids of their own, so both the assistant's tool_calls and the tool
// message's tool_call_id go through this one mapping, which keeps them paired:
//   - an id that already is 9 letters or digits is kept (Mistral's own ids round-trip);
//   - any other id becomes 9 base-62 digits of its 64-bit FNV-1a hash (deterministic, so a
//     conversation renders the same prompt every time and prefix caching keeps working).
// tests/fixtures/make_chat_template_cases.py applies the same rule before rendering with jinja2.
#pragma once
#include <string>
#include <string_view>

namespace kiln::model {

std::string mistral_call_id(std::string_view openai_id);

}  // namespace kiln::model

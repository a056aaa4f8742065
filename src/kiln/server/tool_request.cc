#include "kiln/server/tool_request.h"

#include <fmt/format.h>

#include <algorithm>

#include "kiln/engine/json/json_schema_cache.h"
#include "kiln/model/jinja_json.h"
#include "kiln/server/http_error.h"
#include "kiln/server/json_fields.h"
#include "kiln/server/sampling_parser.h"

namespace kiln::server {
namespace {

// OpenAI's rule for function names: letters, digits, '_' and '-', at most 64.
bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

std::string read_function_name(const json& function, const std::string& path) {
  const json* name = field(function, "name");
  if (!name) bad_field(path + ".name", "is required");
  const std::string& n = as_string(*name, path + ".name");
  if (!valid_function_name(n)) {
    bad_field(path + ".name", "'{}' must be 1 to 64 letters, digits, '_' or '-'", n);
  }
  return n;
}

void check_type_function(const json& obj, const std::string& path, bool required) {
  const json* type = field(obj, "type");
  if (!type) {
    if (required) bad_field(path + ".type", "is required (\"function\")");
    return;
  }
  if (as_string(*type, path + ".type") != "function") {
    bad_field(path + ".type", "'{}' is not supported (only \"function\")",
              type->get<std::string>());
  }
}

ChatTool read_tool(const json& v, const std::string& path) {
  as_object(v, path);
  check_type_function(v, path, true);
  const json* function = field(v, "function");
  if (!function) bad_field(path + ".function", "is required");
  const std::string fpath = path + ".function";
  as_object(*function, fpath);
  ChatTool tool;
  tool.name = read_function_name(*function, fpath);
  if (const json* d = field(*function, "description")) as_string(*d, fpath + ".description");
  if (const json* s = field(*function, "strict")) as_bool(*s, fpath + ".strict");
  // OpenAI: "omitting parameters defines a function with an empty parameter list".
  tool.parameters =
      json{{"type", "object"}, {"properties", json::object()}, {"additionalProperties", false}};
  if (const json* p = field(*function, "parameters")) {
    as_object(*p, fpath + ".parameters");
    tool.parameters = *p;
  }
  return tool;
}

std::string tool_names(const std::vector<ChatTool>& tools) {
  std::string out;
  for (const ChatTool& t : tools) out += (out.empty() ? "" : ", ") + t.name;
  return out;
}

}  // namespace

ChatTools read_chat_tools(const json& body) {
  ChatTools out;
  if (const json* v = field(body, "tools")) {
    as_array(*v, "tools");
    for (size_t i = 0; i < v->size(); ++i) {
      const std::string path = fmt::format("tools[{}]", i);
      ChatTool tool = read_tool((*v)[i], path);
      for (const ChatTool& t : out.tools) {
        if (t.name == tool.name) {
          bad_field(path + ".function.name", "'{}' names two tools", tool.name);
        }
      }
      out.tools.push_back(std::move(tool));
    }
  }
  if (const json* v = field(body, "parallel_tool_calls")) {
    out.parallel = as_bool(*v, "parallel_tool_calls");
  }
  const json* choice = field(body, "tool_choice");
  if (!choice) return out;
  if (choice->is_string()) {
    const std::string& c = choice->get_ref<const std::string&>();
    if (c == "auto") {
      out.choice = ToolChoice::kAuto;
    } else if (c == "none") {
      out.choice = ToolChoice::kNone;
    } else if (c == "required") {
      out.choice = ToolChoice::kRequired;
    } else {
      bad_field("tool_choice",
                "'{}' is not supported (\"auto\", \"none\", \"required\" or "
                "{{\"type\": \"function\", \"function\": {{\"name\": ...}}}})",
                c);
    }
  } else if (choice->is_object()) {
    check_type_function(*choice, "tool_choice", true);
    const json* function = field(*choice, "function");
    if (!function) bad_field("tool_choice.function", "is required");
    as_object(*function, "tool_choice.function");
    out.choice = ToolChoice::kFunction;
    out.function = read_function_name(*function, "tool_choice.function");
    const bool known = std::any_of(out.tools.begin(), out.tools.end(),
                                   [&](const ChatTool& t) { return t.name == out.function; });
    if (!known) {
      bad_field("tool_choice.function.name", "'{}' is not one of the request's tools ({})",
                out.function, out.tools.empty() ? "it has none" : tool_names(out.tools));
    }
  } else {
    bad_field("tool_choice", "must be a string or an object");
  }
  if (out.choice == ToolChoice::kRequired && out.tools.empty()) {
    bad_field("tool_choice", "is \"required\" but the request has no tools");
  }
  return out;
}

std::vector<model::ChatToolCall> read_history_tool_calls(const json& calls, const std::string& path,
                                                         std::vector<std::string>& ids) {
  const std::string cpath = path + ".tool_calls";
  as_array(calls, cpath);
  std::vector<model::ChatToolCall> out;
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string p = fmt::format("{}[{}]", cpath, i);
    as_object(calls[i], p);
    check_type_function(calls[i], p, false);
    model::ChatToolCall call;
    if (const json* id = field(calls[i], "id")) {
      call.id = as_string(*id, p + ".id");
      ids.push_back(call.id);
    }
    const json* function = field(calls[i], "function");
    if (!function) bad_field(p + ".function", "is required");
    as_object(*function, p + ".function");
    call.name = read_function_name(*function, p + ".function");
    const json* args = field(*function, "arguments");
    if (!args) bad_field(p + ".function.arguments", "is required (a JSON string)");
    const std::string& text = as_string(*args, p + ".function.arguments");
    // The template writes the arguments as JSON; keys keep the order the model wrote them in.
    call.arguments = model::jinja_tojson(parse_ordered_json_text(text, p + ".function.arguments"));
    out.push_back(std::move(call));
  }
  return out;
}

std::vector<std::string> render_tool_definitions(const nlohmann::ordered_json& body) {
  std::vector<std::string> out;
  const auto it = body.find("tools");
  if (it == body.end() || !it->is_array()) return out;
  for (const auto& tool : *it) out.push_back(model::jinja_tojson(tool));
  return out;
}

namespace {
// A call_array format's calls are one JSON array: with parallel_tool_calls false it holds one.
std::shared_ptr<const engine::JsonSchema> compile_calls(const std::vector<std::string>& names,
                                                        const std::vector<json>& parameters,
                                                        const ChatTools& tools,
                                                        ToolCallFormat format) {
  const model::ToolCallFormatRow& row = model::tool_call_format_row(format);
  try {
    if (row.call_array) {
      return engine::compile_tool_call_array_cached(names, parameters,
                                                    tools.parallel ? UINT32_MAX : 1);
    }
    return engine::compile_tool_call_cached(names, parameters, std::string(row.arguments_key));
  } catch (const engine::JsonSchemaError& e) {
    bad_field("tools", "{}", e.what());
  }
}
}  // namespace

std::shared_ptr<const engine::JsonSchema> compile_forced_call(const ChatTools& tools,
                                                              ToolCallFormat format) {
  std::vector<std::string> names;
  std::vector<json> parameters;
  for (size_t i = 0; i < tools.tools.size(); ++i) {
    const ChatTool& t = tools.tools[i];
    if (tools.choice == ToolChoice::kFunction && t.name != tools.function) continue;
    // Compiled alone first, so that an error names the keyword where the client wrote it.
    compile_schema(t.parameters, fmt::format("tools[{}].function.parameters", i));
    names.push_back(t.name);
    parameters.push_back(t.parameters);
  }
  return compile_calls(names, parameters, tools, format);
}

void check_tool_schemas(const ChatTools& tools) {
  for (size_t i = 0; i < tools.tools.size(); ++i) {
    compile_schema(tools.tools[i].parameters, fmt::format("tools[{}].function.parameters", i));
  }
}

std::shared_ptr<const engine::JsonSchema> compile_auto_calls(const ChatTools& tools,
                                                             ToolCallFormat format) {
  check_tool_schemas(tools);
  if (model::tool_call_format_row(format).tag_count == 0) return nullptr;
  std::vector<std::string> names;
  std::vector<json> parameters;
  for (const ChatTool& t : tools.tools) {
    names.push_back(t.name);
    parameters.push_back(t.parameters);
  }
  return compile_calls(names, parameters, tools, format);
}

std::vector<std::string> auto_call_markers(ToolCallFormat format) {
  const model::ToolCallFormatRow& row = model::tool_call_format_row(format);
  std::vector<std::string> out;
  for (size_t t = 0; t < row.tag_count; ++t) out.emplace_back(row.tags[t].open);
  return out;
}

}  // namespace kiln::server

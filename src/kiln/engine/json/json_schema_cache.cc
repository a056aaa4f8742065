#include "kiln/engine/json/json_schema_cache.h"

#include <fmt/format.h>

namespace kiln::engine {

std::shared_ptr<const JsonSchema> JsonSchemaCache::get(const std::string& key,
                                                       const Compile& compile) {
  if (std::shared_ptr<const JsonSchema> hit = cache_.find(key)) return hit;
  std::shared_ptr<const JsonSchema> schema = compile();
  return cache_.insert(key, schema, approx_bytes(*schema) + key.size());
}

JsonSchemaCache& JsonSchemaCache::shared() {
  static JsonSchemaCache cache(64, size_t{256} << 20);
  return cache;
}

size_t approx_bytes(const JsonSchema& schema) {
  size_t bytes = sizeof(JsonSchema) + schema.node_count() * sizeof(SchemaNode);
  for (size_t i = 0; i < schema.trie_count(); ++i) {
    bytes += schema.trie(static_cast<int32_t>(i)).nodes.size() * (sizeof(LiteralTrie::Node) + 8);
  }
  for (size_t i = 0; i < schema.automaton_count(); ++i) {
    const StringAutomaton& a = schema.automaton(static_cast<int32_t>(i));
    for (uint32_t s = 0; s < a.size(); ++s) {
      bytes += 32 + a.edges(s).size() * sizeof(StringAutomaton::Edge);
    }
  }
  return bytes;
}

namespace {

// The arguments of a tool-call compile as one canonical text (nlohmann::json sorts keys).
std::string tool_call_key(const char* kind, const std::vector<std::string>& names,
                          const std::vector<nlohmann::json>& parameters, const std::string& extra) {
  nlohmann::json key = {
      {"kind", kind}, {"names", names}, {"parameters", parameters}, {"extra", extra}};
  return key.dump();
}

}  // namespace

std::shared_ptr<const JsonSchema> compile_schema_cached(const nlohmann::json& schema) {
  return JsonSchemaCache::shared().get("schema:" + schema.dump(),
                                       [&] { return JsonSchema::compile(schema); });
}

std::shared_ptr<const JsonSchema> compile_tool_call_cached(
    const std::vector<std::string>& names, const std::vector<nlohmann::json>& parameters,
    const std::string& arguments_key) {
  return JsonSchemaCache::shared().get(
      tool_call_key("call", names, parameters, arguments_key),
      [&] { return JsonSchema::compile_tool_call(names, parameters, arguments_key); });
}

std::shared_ptr<const JsonSchema> compile_tool_call_array_cached(
    const std::vector<std::string>& names, const std::vector<nlohmann::json>& parameters,
    uint32_t max_calls) {
  return JsonSchemaCache::shared().get(
      tool_call_key("array", names, parameters, fmt::format("{}", max_calls)),
      [&] { return JsonSchema::compile_tool_call_array(names, parameters, max_calls); });
}

}  // namespace kiln::engine

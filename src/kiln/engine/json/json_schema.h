// A JSON-schema subset compiled into the tables JsonMatcher (json_matcher.h) walks while it
// constrains generation. Immutable once compiled; one compiled schema is shared by every
// sequence of a request (n > 1).
//
// Supported keywords: type (object, array, string, number, integer, boolean, null, or a list
// of them), properties, required, additionalProperties (false, or true without properties),
// items, minItems, maxItems, minLength, maxLength, minimum, maximum, exclusiveMinimum,
// exclusiveMaximum (json_number_bounds.h), pattern (regex_subset.h), format (date, time,
// date-time, uuid, email, ipv4, ipv6: string_formats.h), enum, const, anyOf (branches must start
// with different characters, e.g. {"type": "string"} | {"type": "null"}), $ref to "#",
// "#/$defs/..." or
// "#/definitions/...", and $defs/definitions. Annotations that constrain nothing (title,
// description, $schema, $id, $comment, default, examples) are ignored. Any other keyword is
// an error naming it: a keyword silently ignored would let outputs through that the client
// believes are excluded.
//
// Objects with `properties` get only those keys (as OpenAI's strict structured outputs and
// xgrammar do), each at most once, in any order; `}` is allowed once every `required` key is
// present. Every output is therefore valid against the schema as written.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "kiln/engine/json/json_number_bounds.h"
#include "kiln/engine/json/literal_trie.h"
#include "kiln/engine/json/string_automaton.h"

namespace kiln::engine {

// A schema the compiler refuses. `path` is the offending keyword's location inside the
// schema ("properties.age.minimum"), `what` says why.
class JsonSchemaError : public std::runtime_error {
 public:
  JsonSchemaError(std::string path, const std::string& message)
      : std::runtime_error(message), path_(std::move(path)) {}
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

namespace json_type {
constexpr uint8_t kObject = 1, kArray = 2, kString = 4, kNumber = 8, kInteger = 16, kBoolean = 32,
                  kNull = 64, kAny = 127;
}

struct SchemaNode {
  uint8_t types = json_type::kAny;  // json_type bits; kNumber admits integers too
  // enum / const: the allowed values as compact JSON text (index into JsonSchema::tries).
  int32_t literals = -1;
  // anyOf: alternatives, told apart by their first byte (first_bytes are disjoint).
  std::vector<uint32_t> any_of;
  // Objects. With properties: only these keys (key_trie holds them quoted, as JSON text).
  bool has_properties = false;
  std::vector<uint32_t> property_nodes;  // schema of property i
  int32_t key_trie = -1;
  uint64_t required = 0;  // bit i: property i is required
  // Arrays.
  int64_t items = -1;  // schema node of every item; -1: any value
  uint32_t min_items = 0;
  uint32_t max_items = UINT32_MAX;
  // Strings: characters (Unicode code points, as JSON Schema counts them; an escape is one, a
  // surrogate pair escape too).
  uint32_t min_length = 0;
  uint32_t max_length = UINT32_MAX;
  bool length_limited() const { return min_length > 0 || max_length != UINT32_MAX; }
  // pattern / format: the automaton (JsonSchema::automaton) a string must follow, lengths
  // folded in (min_length and max_length are then left unlimited).
  int32_t automaton = -1;
  // Numbers: minimum / maximum and their exclusive forms (for integers folded to inclusive
  // integer bounds).
  NumberBounds bounds;
  // Tool calls (JsonSchema::compile_tool_call): the value of property `tag` (an enum) picks the
  // schema of property `tagged`, tagged_nodes[i] for the enum's value i. The tagged key may
  // only be written after the tag.
  int32_t tag = -1;
  int32_t tagged = -1;
  std::vector<uint32_t> tagged_nodes;
  // Bytes a value of this node can start with (after whitespace).
  std::array<bool, 256> first_bytes{};
};

class JsonSchema {
 public:
  // Compiles `schema` (a JSON-schema object, or true for any value). Throws JsonSchemaError.
  static std::shared_ptr<const JsonSchema> compile(const nlohmann::json& schema);
  // One function call as a tool call writes it: {"name": names[i], "arguments": <a value of
  // parameters[i]>}, "name" first, so that the arguments are checked against the schema of the
  // function named. Each parameters schema is compiled on its own ("#" is its root). Throws
  // JsonSchemaError as compile() does, its path prefixed by "[i]" for the i-th schema.
  // `arguments_key`: the member holding the arguments ("parameters" in Llama 3.1's calls).
  static std::shared_ptr<const JsonSchema> compile_tool_call(
      const std::vector<std::string>& names, const std::vector<nlohmann::json>& parameters,
      const std::string& arguments_key = "arguments");
  // A JSON array of 1 to max_calls such calls (Mistral's [TOOL_CALLS] format).
  static std::shared_ptr<const JsonSchema> compile_tool_call_array(
      const std::vector<std::string>& names, const std::vector<nlohmann::json>& parameters,
      uint32_t max_calls);
  // Any JSON value (root_types restricts the top level: json_object mode uses kObject).
  static std::shared_ptr<const JsonSchema> any(uint8_t root_types = json_type::kAny);

  static constexpr size_t kMaxProperties = 64;  // the matcher tracks used keys in 64 bits

  uint32_t root() const { return root_; }
  uint32_t any_node() const { return any_node_; }
  const SchemaNode& node(uint32_t i) const { return nodes_[i]; }
  const LiteralTrie& trie(int32_t i) const { return tries_[static_cast<size_t>(i)]; }
  const StringAutomaton& automaton(int32_t i) const { return automata_[static_cast<size_t>(i)]; }
  size_t node_count() const { return nodes_.size(); }
  size_t trie_count() const { return tries_.size(); }
  size_t automaton_count() const { return automata_.size(); }

 private:
  friend class JsonSchemaCompiler;
  // compile_tool_call (max_calls 0) and compile_tool_call_array (an array of 1 to max_calls).
  static std::shared_ptr<const JsonSchema> compile_tool_calls(
      const std::vector<std::string>& names, const std::vector<nlohmann::json>& parameters,
      const std::string& arguments_key, uint32_t max_calls);
  std::vector<SchemaNode> nodes_;
  std::vector<LiteralTrie> tries_;
  std::vector<StringAutomaton> automata_;
  uint32_t root_ = 0;
  uint32_t any_node_ = 0;
};

}  // namespace kiln::engine

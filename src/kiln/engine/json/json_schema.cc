#include "kiln/engine/json/json_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "kiln/engine/json/constraint_budget.h"
#include "kiln/engine/json/regex_subset.h"
#include "kiln/engine/json/string_formats.h"

namespace kiln::engine {

using nlohmann::json;

namespace {

// Keywords that describe a schema without constraining values.
bool is_annotation(std::string_view k) {
  return k == "title" || k == "description" || k == "$schema" || k == "$id" || k == "$comment" ||
         k == "default" || k == "examples";
}

std::string join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

uint8_t type_bit(const std::string& name, const std::string& path) {
  if (name == "object") return json_type::kObject;
  if (name == "array") return json_type::kArray;
  if (name == "string") return json_type::kString;
  if (name == "number") return json_type::kNumber;
  if (name == "integer") return json_type::kInteger;
  if (name == "boolean") return json_type::kBoolean;
  if (name == "null") return json_type::kNull;
  throw JsonSchemaError(path, fmt::format("'{}' is not a JSON-schema type", name));
}

// Does `v` have one of the types in `types`? (As JSON Schema: an integer is also a number.)
bool value_has_type(const json& v, uint8_t types) {
  using namespace json_type;
  if (v.is_object()) return types & kObject;
  if (v.is_array()) return types & kArray;
  if (v.is_string()) return types & kString;
  if (v.is_boolean()) return types & kBoolean;
  if (v.is_null()) return types & kNull;
  if (v.is_number_integer()) return types & (kInteger | kNumber);
  return types & kNumber;
}

void set_first_bytes_of_types(SchemaNode& n) {
  using namespace json_type;
  auto& f = n.first_bytes;
  if (n.types & kObject) f['{'] = true;
  if (n.types & kArray) f['['] = true;
  if (n.types & kString) f['"'] = true;
  if (n.types & (kNumber | kInteger)) {
    f['-'] = true;
    for (int c = '0'; c <= '9'; ++c) f[static_cast<size_t>(c)] = true;
  }
  if (n.types & kBoolean) f['t'] = f['f'] = true;
  if (n.types & kNull) f['n'] = true;
}

uint32_t read_count(const json& v, const std::string& path) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) {
    throw JsonSchemaError(path, "must be a non-negative integer");
  }
  return static_cast<uint32_t>(v.get<int64_t>());
}

// A pair of count keywords (minItems/maxItems, minLength/maxLength): each present one read into
// lo or hi (absent ones keep their defaults), and lo > hi refused at the minimum's path.
void read_count_bounds(const json& s, const std::string& path, const std::string& min_key,
                       const std::string& max_key, uint32_t& lo, uint32_t& hi) {
  const std::string min_path = join(path, min_key);
  if (const auto it = s.find(min_key); it != s.end()) lo = read_count(*it, min_path);
  if (const auto it = s.find(max_key); it != s.end()) hi = read_count(*it, join(path, max_key));
  if (lo > hi) throw JsonSchemaError(min_path, "is larger than " + max_key);
}

}  // namespace

class JsonSchemaCompiler {
 public:
  explicit JsonSchemaCompiler(const json& root) : root_(&root) {}

  std::shared_ptr<JsonSchema> run() {
    out_ = std::make_shared<JsonSchema>();
    out_->nodes_.emplace_back();  // the root, node 0
    refs_["#"] = 0;
    out_->any_node_ = new_node();
    set_first_bytes_of_types(out_->nodes_[out_->any_node_]);
    if (root_->is_object() && root_->contains("$ref")) {
      refs_.erase("#");  // "#" inside would mean the reference itself: refused as unsupported
      out_->root_ = resolve_ref(*root_, (*root_)["$ref"], "");
      refs_["#"] = out_->root_;
    } else {
      compile_into(0, *root_, "");
    }
    return out_;
  }

  // Compiles `schema` into the same tables as a document of its own ("#" is its root):
  // the root of another document. Call after run().
  uint32_t add_document(const json& schema) {
    root_ = &schema;
    refs_.clear();
    ref_chain_ = 0;
    if (schema.is_object() && schema.contains("$ref")) {
      const uint32_t n = resolve_ref(schema, schema["$ref"], "");
      return n;
    }
    const uint32_t n = new_node();
    refs_["#"] = n;
    compile_into(n, schema, "");
    return n;
  }

 private:
  uint32_t new_node() {
    out_->nodes_.emplace_back();
    return static_cast<uint32_t>(out_->nodes_.size() - 1);
  }

  uint32_t compile(const json& s, const std::string& path) {
    if (path.size() > 2048) throw JsonSchemaError(path.substr(0, 64) + "...", "nests too deeply");
    if (s.is_object()) {
      if (const auto it = s.find("$ref"); it != s.end()) return resolve_ref(s, *it, path);
    }
    const uint32_t n = new_node();
    compile_into(n, s, path);
    return n;
  }

  uint32_t resolve_ref(const json& s, const json& ref, const std::string& path) {
    const std::string ref_path = join(path, "$ref");
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (it.key() != "$ref" && !is_annotation(it.key()) && it.key() != "$defs" &&
          it.key() != "definitions") {
        throw JsonSchemaError(join(path, it.key()), "cannot be combined with $ref");
      }
    }
    if (!ref.is_string()) throw JsonSchemaError(ref_path, "must be a string");
    const std::string r = ref.get<std::string>();
    if (const auto it = refs_.find(r); it != refs_.end()) return it->second;
    if (r.rfind("#/", 0) != 0) {
      throw JsonSchemaError(ref_path, fmt::format("'{}' is not supported (only references inside "
                                                  "the schema: \"#\" or \"#/...\")",
                                                  r));
    }
    const json* target = nullptr;
    try {
      target = &root_->at(json::json_pointer(r.substr(1)));
    } catch (const std::exception&) {
      throw JsonSchemaError(ref_path, fmt::format("'{}' points to nothing in the schema", r));
    }
    if (target->is_object() && target->contains("$ref")) {  // a reference to a reference
      if (++ref_chain_ > 32) throw JsonSchemaError(ref_path, "references loop");
      const uint32_t n = resolve_ref(*target, (*target)["$ref"], r.substr(2));
      --ref_chain_;
      refs_[r] = n;
      return n;
    }
    const uint32_t n = new_node();
    refs_[r] = n;  // before compiling, so that recursive references find it
    compile_into(n, *target, r.substr(2));
    return n;
  }

  void compile_into(uint32_t index, const json& s, const std::string& path) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) throw JsonSchemaError(path, "the schema false allows nothing");
      set_first_bytes_of_types(out_->nodes_[index]);
      return;
    }
    if (!s.is_object()) throw JsonSchemaError(path, "a schema must be an object or true");
    in_progress_.insert(index);
    std::set<std::string> keys;
    for (auto it = s.begin(); it != s.end(); ++it) {
      const std::string& k = it.key();
      if (is_annotation(k)) continue;
      static const std::set<std::string> kSupported = {"type",
                                                       "properties",
                                                       "required",
                                                       "additionalProperties",
                                                       "items",
                                                       "minItems",
                                                       "maxItems",
                                                       "minLength",
                                                       "maxLength",
                                                       "enum",
                                                       "const",
                                                       "anyOf",
                                                       "$defs",
                                                       "definitions",
                                                       "minimum",
                                                       "maximum",
                                                       "exclusiveMinimum",
                                                       "exclusiveMaximum",
                                                       "pattern",
                                                       "format"};
      if (!kSupported.count(k)) {
        throw JsonSchemaError(join(path, k), "is not a supported JSON-schema keyword");
      }
      keys.insert(k);
    }
    SchemaNode n;
    if (const auto it = s.find("type"); it != s.end()) {
      const std::string tpath = join(path, "type");
      if (it->is_string()) {
        n.types = type_bit(it->get<std::string>(), tpath);
      } else if (it->is_array() && !it->empty()) {
        n.types = 0;
        for (const auto& t : *it) {
          if (!t.is_string()) throw JsonSchemaError(tpath, "must list type names");
          n.types |= type_bit(t.get<std::string>(), tpath);
        }
      } else {
        throw JsonSchemaError(tpath, "must be a type name or a non-empty list of them");
      }
    }
    const bool has_enum = keys.count("enum") || keys.count("const");
    for (const char* k : {"minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
                          "exclusiveMaximum", "pattern", "format"}) {
      // The literals and anyOf's branches are matched by their own frames, which would not
      // see a length limit given here: refused rather than silently not enforced.
      if (keys.count(k) && (has_enum || keys.count("anyOf")))
        throw JsonSchemaError(join(path, k), "is not supported beside enum, const or anyOf");
    }
    if (has_enum) {
      compile_literals(s, keys, path, n);
    } else if (keys.count("anyOf")) {
      compile_any_of(s, keys, path, n);
    } else {
      set_first_bytes_of_types(n);
    }
    // first_bytes are known now: store them before compiling children, which may refer back.
    out_->nodes_[index] = n;
    in_progress_.erase(index);
    if (!has_enum) {
      compile_object(s, path, n);
      compile_array(s, path, n);
      compile_string(s, path, n);
      compile_number_bounds(s, path, n);
    }
    out_->nodes_[index] = std::move(n);
  }

  void compile_literals(const json& s, const std::set<std::string>& keys, const std::string& path,
                        SchemaNode& n) {
    for (const auto& k : keys) {
      if (k != "enum" && k != "const" && k != "type" && k != "$defs" && k != "definitions") {
        throw JsonSchemaError(join(path, k), "cannot be combined with enum or const");
      }
    }
    std::vector<json> values;
    if (const auto it = s.find("enum"); it != s.end()) {
      if (!it->is_array() || it->empty()) {
        throw JsonSchemaError(join(path, "enum"), "must be a non-empty list");
      }
      values.assign(it->begin(), it->end());
    }
    if (const auto it = s.find("const"); it != s.end()) {
      if (s.contains("enum")) {
        // Both: the const, if the enum lists it.
        const bool listed = std::find(values.begin(), values.end(), *it) != values.end();
        values.clear();
        if (listed) values.push_back(*it);
      } else {
        values.push_back(*it);
      }
    }
    LiteralTrie trie;
    int32_t count = 0;
    for (const json& v : values) {
      if (!value_has_type(v, n.types)) continue;
      const std::string text = v.dump();
      trie.add(text, count++);
      n.first_bytes[static_cast<uint8_t>(text[0])] = true;
    }
    if (count == 0) {
      throw JsonSchemaError(join(path, s.contains("enum") ? "enum" : "const"),
                            "allows no value (none matches type, or const is not in enum)");
    }
    out_->tries_.push_back(std::move(trie));
    n.literals = static_cast<int32_t>(out_->tries_.size() - 1);
  }

  void compile_any_of(const json& s, const std::set<std::string>& keys, const std::string& path,
                      SchemaNode& n) {
    for (const auto& k : keys) {
      if (k != "anyOf" && k != "$defs" && k != "definitions") {
        throw JsonSchemaError(join(path, k), "cannot be combined with anyOf");
      }
    }
    const std::string apath = join(path, "anyOf");
    const json& branches = s["anyOf"];
    if (!branches.is_array() || branches.empty()) {
      throw JsonSchemaError(apath, "must be a non-empty list of schemas");
    }
    for (size_t i = 0; i < branches.size(); ++i) {
      const std::string bpath = fmt::format("{}[{}]", apath, i);
      const uint32_t b = compile(branches[i], bpath);
      if (in_progress_.count(b)) {
        throw JsonSchemaError(bpath, "refers back to the anyOf it is in (not supported)");
      }
      const auto& fb = out_->nodes_[b].first_bytes;
      for (size_t c = 0; c < 256; ++c) {
        if (!fb[c]) continue;
        if (n.first_bytes[c]) {
          throw JsonSchemaError(bpath,
                                "overlaps an earlier branch (anyOf branches must start "
                                "differently, e.g. be of different types)");
        }
        n.first_bytes[c] = true;
      }
      n.any_of.push_back(b);
    }
    n.types = 0;  // the branches decide
  }

  void compile_object(const json& s, const std::string& path, SchemaNode& n) {
    const auto props = s.find("properties");
    const auto additional = s.find("additionalProperties");
    if (additional != s.end() && !additional->is_boolean()) {
      throw JsonSchemaError(join(path, "additionalProperties"),
                            "is only supported as true or false");
    }
    const bool closed = additional != s.end() && !additional->get<bool>();
    if (props != s.end()) {
      const std::string ppath = join(path, "properties");
      if (!props->is_object()) throw JsonSchemaError(ppath, "must be an object");
      if (props->size() > JsonSchema::kMaxProperties) {
        throw JsonSchemaError(ppath, fmt::format("has {} properties, more than the {} supported",
                                                 props->size(), JsonSchema::kMaxProperties));
      }
    }
    if (props == s.end() && !closed) {
      if (s.contains("required")) {
        throw JsonSchemaError(join(path, "required"), "needs properties listing those keys");
      }
      return;  // any keys, any values
    }
    n.has_properties = true;
    LiteralTrie keys;
    std::vector<std::string> names;
    if (props != s.end()) {
      for (auto it = props->begin(); it != props->end(); ++it) {
        names.push_back(it.key());
        keys.add(json(it.key()).dump(), static_cast<int32_t>(names.size() - 1));
      }
      // Compiled after the key table: a property may refer back to this very node.
      int i = 0;
      for (auto it = props->begin(); it != props->end(); ++it, ++i) {
        n.property_nodes.push_back(compile(it.value(), join(join(path, "properties"), it.key())));
      }
    }
    if (const auto req = s.find("required"); req != s.end()) {
      const std::string rpath = join(path, "required");
      if (!req->is_array()) throw JsonSchemaError(rpath, "must be a list of property names");
      for (const auto& r : *req) {
        const auto at = r.is_string() ? std::find(names.begin(), names.end(), r.get<std::string>())
                                      : names.end();
        if (at == names.end()) {
          throw JsonSchemaError(rpath, fmt::format("{} is not one of the properties", r.dump()));
        }
        n.required |= uint64_t{1} << (at - names.begin());
      }
    }
    out_->tries_.push_back(std::move(keys));
    n.key_trie = static_cast<int32_t>(out_->tries_.size() - 1);
  }

  void compile_array(const json& s, const std::string& path, SchemaNode& n) {
    if (const auto it = s.find("items"); it != s.end()) {
      if (it->is_array()) {
        throw JsonSchemaError(join(path, "items"), "as a list (tuple validation) is not supported");
      }
      n.items = compile(*it, join(path, "items"));
    }
    read_count_bounds(s, path, "minItems", "maxItems", n.min_items, n.max_items);
  }

  void compile_string(const json& s, const std::string& path, SchemaNode& n) {
    read_count_bounds(s, path, "minLength", "maxLength", n.min_length, n.max_length);
    compile_string_automaton(s, path, n);
  }

  // pattern and format, as one automaton with the length limits folded in.
  void compile_string_automaton(const json& s, const std::string& path, SchemaNode& n) {
    const auto pattern = s.find("pattern");
    const auto format = s.find("format");
    if (pattern == s.end() && format == s.end()) return;
    std::string where = join(path, pattern != s.end() ? "pattern" : "format");
    std::optional<StringAutomaton> a;
    auto add = [&](StringAutomaton next) {
      a = a ? StringAutomaton::intersect(*a, next, constraint_budget_) : std::move(next);
    };
    bool allows_some = false;
    try {
      if (pattern != s.end()) {
        if (!pattern->is_string()) throw JsonSchemaError(where, "must be a string");
        try {
          add(compile_pattern(pattern->get<std::string>(), constraint_budget_));
        } catch (const RegexError& e) {
          throw JsonSchemaError(where, fmt::format("{} {}", pattern->dump(), e.what()));
        }
      }
      if (format != s.end()) {
        const std::string fpath = join(path, "format");
        if (!format->is_string()) throw JsonSchemaError(fpath, "must be a string");
        const char* p = string_format_pattern(format->get<std::string>());
        if (p == nullptr) {
          throw JsonSchemaError(fpath, fmt::format("{} is not a supported format (supported: {})",
                                                   format->dump(), supported_string_formats()));
        }
        add(compile_pattern(p, constraint_budget_));
      }
      if (n.length_limited()) {
        add(StringAutomaton::length_between(n.min_length, n.max_length, constraint_budget_));
      }
      allows_some = a->trim(constraint_budget_);
    } catch (const std::length_error&) {
      throw JsonSchemaError(where, fmt::format("with the string's other keywords needs more "
                                               "than {} automaton states",
                                               StringAutomaton::kMaxStates));
    } catch (const ConstraintBudgetExceeded& e) {
      throw JsonSchemaError(where, fmt::format("{} (the budget of all the string constraints in "
                                               "one schema)",
                                               e.what()));
    }
    if (!allows_some) {
      throw JsonSchemaError(where, "allows no string together with the string's other keywords");
    }
    n.min_length = 0;
    n.max_length = UINT32_MAX;
    out_->automata_.push_back(std::move(*a));
    n.automaton = static_cast<int32_t>(out_->automata_.size() - 1);
  }

  // minimum / maximum / exclusiveMinimum / exclusiveMaximum: the tighter of each pair.
  void compile_number_bounds(const json& s, const std::string& path, SchemaNode& n) {
    NumberBounds& b = n.bounds;
    auto bound = [&](const char* key, bool upper, bool open) {
      const auto it = s.find(key);
      if (it == s.end()) return;
      if (it->is_boolean()) {
        throw JsonSchemaError(join(path, key),
                              "as a boolean (draft 4) is not supported; give the bound itself");
      }
      if (!it->is_number()) throw JsonSchemaError(join(path, key), "must be a number");
      const long double v = it->is_number_integer() ? static_cast<long double>(it->get<int64_t>())
                                                    : static_cast<long double>(it->get<double>());
      if (upper) {
        if (!b.has_hi || v < b.hi || (v == b.hi && open)) {
          b.hi = v;
          b.hi_open = open;
        }
        b.has_hi = true;
      } else {
        if (!b.has_lo || v > b.lo || (v == b.lo && open)) {
          b.lo = v;
          b.lo_open = open;
        }
        b.has_lo = true;
      }
      b.active = true;
    };
    bound("minimum", false, false);
    bound("exclusiveMinimum", false, true);
    bound("maximum", true, false);
    bound("exclusiveMaximum", true, true);
    if (!b.active) return;
    const bool integer = !(n.types & json_type::kNumber);
    if (integer) {  // integer bounds, inclusive
      if (b.has_lo) b.lo = b.lo_open ? std::floor(b.lo) + 1 : std::ceil(b.lo);
      if (b.has_hi) b.hi = b.hi_open ? std::ceil(b.hi) - 1 : std::floor(b.hi);
      b.lo_open = b.hi_open = false;
    }
    NumberSoFar any_positive, any_negative;
    any_negative.negative = true;
    auto any_reachable = [&] {
      return number_reachable(b, any_positive, integer) ||
             number_reachable(b, any_negative, integer);
    };
    if (!integer && !any_reachable()) b.by_double_only = true;
    if (!any_reachable()) {
      throw JsonSchemaError(join(path, b.has_lo ? "minimum" : "maximum"),
                            fmt::format("no {} of at most {} digits is within the bounds",
                                        integer ? "integer" : "number", kMaxBoundedDigits));
    }
  }

  const json* root_;
  std::shared_ptr<JsonSchema> out_;
  std::map<std::string, uint32_t> refs_;
  int ref_chain_ = 0;
  std::set<uint32_t> in_progress_;  // nodes whose first_bytes are not known yet
  // Shared by every pattern, format and length limit of the schema (and of each tool's
  // parameters compiled beside it): many of them cannot multiply the compile time.
  ConstraintBudget constraint_budget_;
};

std::shared_ptr<const JsonSchema> JsonSchema::compile(const json& schema) {
  return JsonSchemaCompiler(schema).run();
}

std::shared_ptr<const JsonSchema> JsonSchema::compile_tool_call(
    const std::vector<std::string>& names, const std::vector<json>& parameters,
    const std::string& arguments_key) {
  return compile_tool_calls(names, parameters, arguments_key, 0);
}

std::shared_ptr<const JsonSchema> JsonSchema::compile_tool_call_array(
    const std::vector<std::string>& names, const std::vector<json>& parameters,
    uint32_t max_calls) {
  return compile_tool_calls(names, parameters, "arguments", std::max<uint32_t>(max_calls, 1));
}

std::shared_ptr<const JsonSchema> JsonSchema::compile_tool_calls(
    const std::vector<std::string>& names, const std::vector<json>& parameters,
    const std::string& arguments_key, uint32_t max_calls) {
  if (names.empty() || names.size() != parameters.size()) {
    throw JsonSchemaError("", fmt::format("a tool call needs one schema per function name ({} "
                                          "names, {} schemas)",
                                          names.size(), parameters.size()));
  }
  const json call = {{"type", "object"},
                     {"properties", {{"name", {{"enum", names}}}, {arguments_key, json::object()}}},
                     {"required", {"name", arguments_key}},
                     {"additionalProperties", false}};
  json root_schema = call;
  if (max_calls > 0) {
    root_schema = {{"type", "array"}, {"items", call}, {"minItems", 1}};
    if (max_calls != UINT32_MAX) root_schema["maxItems"] = max_calls;
  }
  JsonSchemaCompiler compiler(root_schema);
  std::shared_ptr<JsonSchema> out = compiler.run();
  const uint32_t call_node =
      max_calls > 0 ? static_cast<uint32_t>(out->nodes_[out->root_].items) : out->root_;
  SchemaNode& node = out->nodes_[call_node];
  // Properties are numbered in the order the compiler lists them (nlohmann's: sorted).
  int32_t index = 0;
  for (const auto& [key, value] : call["properties"].items()) {
    (key == "name" ? node.tag : node.tagged) = index++;
  }
  std::vector<uint32_t> tagged;
  for (size_t i = 0; i < parameters.size(); ++i) {
    try {
      tagged.push_back(compiler.add_document(parameters[i]));
    } catch (const JsonSchemaError& e) {
      throw JsonSchemaError(fmt::format("[{}]{}{}", i, e.path().empty() ? "" : ".", e.path()),
                            e.what());
    }
  }
  out->nodes_[call_node].tagged_nodes = std::move(tagged);  // (add_document grew nodes_)
  return out;
}

std::shared_ptr<const JsonSchema> JsonSchema::any(uint8_t root_types) {
  json s = json::object();
  if (root_types != json_type::kAny) {
    json types = json::array();
    for (const char* t : {"object", "array", "string", "number", "integer", "boolean", "null"}) {
      if (root_types & type_bit(t, "")) types.push_back(t);
    }
    s["type"] = types;
  }
  return compile(s);
}

}  // namespace kiln::engine

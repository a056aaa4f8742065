// Compiled schemas by their canonical text. Clients send the same schema with every request
// (a response_format, a tool list); compiling it (patterns determinized, tries built) costs up
// to a second, and two requests that share one compiled copy also share its cached token masks
// (json_mask_cache.h). Bounded by entries and by an estimate of the memory they hold; the least
// recently used go first. Errors are not kept: a refused schema is compiled (and refused within
// its budget) again.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "kiln/base/lru_cache.h"
#include "kiln/engine/json/json_schema.h"

namespace kiln::engine {

class JsonSchemaCache {
 public:
  JsonSchemaCache(size_t max_entries, size_t max_bytes) : cache_(max_entries, max_bytes) {}

  using Compile = std::function<std::shared_ptr<const JsonSchema>()>;
  // The schema compiled under `key`, or compile() kept under it. compile() runs outside the
  // lock (two threads may both compile a new key; one result is kept).
  std::shared_ptr<const JsonSchema> get(const std::string& key, const Compile& compile);

  // The process's cache, used by the request parsers (64 schemas, 256 MiB).
  static JsonSchemaCache& shared();

  using Stats = LruCache<JsonSchema>::Stats;
  Stats stats() const { return cache_.stats(); }

 private:
  LruCache<JsonSchema> cache_;
};

// Memory a compiled schema holds, roughly (nodes, tries, automaton edges).
size_t approx_bytes(const JsonSchema& schema);

// Cached forms of JsonSchema's compile functions, keyed by their arguments' canonical JSON.
std::shared_ptr<const JsonSchema> compile_schema_cached(const nlohmann::json& schema);
std::shared_ptr<const JsonSchema> compile_tool_call_cached(
    const std::vector<std::string>& names, const std::vector<nlohmann::json>& parameters,
    const std::string& arguments_key);
std::shared_ptr<const JsonSchema> compile_tool_call_array_cached(
    const std::vector<std::string>& names, const std::vector<nlohmann::json>& parameters,
    uint32_t max_calls);

}  // namespace kiln::engine

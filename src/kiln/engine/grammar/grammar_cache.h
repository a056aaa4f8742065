// Compiled grammars by dialect and text, as JsonSchemaCache keeps schemas: clients send the same
// grammar with every request, and requests that share one compiled copy share its cached token
// masks too (the mask cache keys on the grammar's address). Errors are not kept.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "kiln/engine/grammar/grammar.h"

namespace kiln::engine {

enum class GrammarDialect {
  kGbnf,   // llama.cpp's `grammar`
  kEbnf,   // SGLang's `ebnf` (XGrammar's EBNF; gbnf_parser.h reads both)
  kRegex,  // SGLang's `regex`: the whole output matches
};

// Compiles within one ConstraintBudget. Throws GrammarError (the message names the rule or the
// position) or ConstraintBudgetExceeded.
std::shared_ptr<const Grammar> compile_grammar_text(GrammarDialect dialect, std::string_view text);

// The same through the process's cache (64 grammars, 256 MiB).
std::shared_ptr<const Grammar> compile_grammar_cached(GrammarDialect dialect,
                                                      const std::string& text);

}  // namespace kiln::engine

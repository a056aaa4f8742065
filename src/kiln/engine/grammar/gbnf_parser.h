// llama.cpp's GBNF and SGLang's `ebnf` (the GBNF-like EBNF SGLang hands to XGrammar), read into
// a GrammarAst. One reader serves both: XGrammar's EBNF is GBNF with extensions, and the ones
// kiln takes are harmless in GBNF too.
//
//   rule     ::= name "::=" alts           (the start rule is `root`)
//   alts     ::= seq ("|" seq)*
//   seq      ::= (item postfix*)*
//   item     ::= "literal" | 'literal' | [class] | [^class] | . | name | "(" alts ")"
//   postfix  ::= * | + | ? | {m} | {m,} | {m,n} | {,n}
//
// Names are letters, digits, '-' and '_'. Literals and classes take the escapes \n \t \r \f \v
// \b \0 \\ \" \' \[ \] \- \/ \^ \xHH \uHHHH \UHHHHHHHH. `#` starts a comment to the end of the
// line. Whitespace (line breaks included) separates items; a rule ends where the next
// `name ::=` begins, so rules may span lines with a leading `|` or an open group, as in
// llama.cpp's grammars/ and XGrammar's. `.` is any character (a line break included, as in
// llama.cpp).
//
// Refused with the position (line and column): syntax errors, an escape not listed, a bad
// repetition bound ({n,m} with m < n, or past kMaxGrammarRepeat), a name defined twice,
// XGrammar's lookahead assertions `(= ...)` and other extensions (not implemented).
#pragma once
#include <string_view>

#include "kiln/engine/grammar/grammar_ast.h"

namespace kiln::engine {

constexpr uint32_t kMaxGrammarRepeat = 10000;

// Throws GrammarError.
GrammarAst parse_gbnf(std::string_view text);

}  // namespace kiln::engine

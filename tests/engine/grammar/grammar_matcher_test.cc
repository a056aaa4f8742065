// The grammar engine on its own: the GBNF/EBNF reader takes every construct, refusals name the
// rule or position, and the matcher accepts exactly the sentences (and their prefixes) of small
// grammars, byte by byte, multi-byte characters included; SGLang's regex runs as a grammar with
// whole-match semantics.
#include "kiln/engine/grammar/grammar_matcher.h"

#include <gtest/gtest.h>

#include <iostream>
#include <string>

#include "kiln/engine/grammar/grammar_ast.h"
#include "kiln/engine/grammar/grammar_cache.h"
#include "kiln/engine/json/constraint_budget.h"

namespace kiln::engine {
namespace {

enum class Verdict { kAccept, kPrefix, kReject };

Verdict check(const std::shared_ptr<const Grammar>& g, const std::string& s) {
  GrammarMatcher m(g);
  if (!m.feed(s)) return Verdict::kReject;
  return m.complete() ? Verdict::kAccept : Verdict::kPrefix;
}

std::shared_ptr<const Grammar> gbnf(const char* text) {
  return compile_grammar_text(GrammarDialect::kGbnf, text);
}

std::string error_of(GrammarDialect d, const std::string& text) {
  try {
    compile_grammar_text(d, text);
  } catch (const GrammarError& e) {
    return e.what();
  } catch (const ConstraintBudgetExceeded& e) {
    return std::string("budget: ") + e.what();
  }
  return "";
}

TEST(GrammarMatcher, LiteralsAlternativesAndGroups) {
  auto g = gbnf(R"g(root ::= "ab" | "c" ("d" | "e") # a comment
  )g");
  EXPECT_EQ(check(g, "ab"), Verdict::kAccept);
  EXPECT_EQ(check(g, "a"), Verdict::kPrefix);
  EXPECT_EQ(check(g, "ce"), Verdict::kAccept);
  EXPECT_EQ(check(g, "cf"), Verdict::kReject);
  EXPECT_EQ(check(g, "abc"), Verdict::kReject);
  EXPECT_EQ(check(g, ""), Verdict::kPrefix);
}

TEST(GrammarMatcher, Repetitions) {
  auto g = gbnf(R"g(root ::= "a"* "b"+ "c"? "d"{2} "e"{1,} "f"{1,3} "g"{,1})g");
  EXPECT_EQ(check(g, "bddef"), Verdict::kAccept);
  EXPECT_EQ(check(g, "aaabbcddeeefffg"), Verdict::kAccept);
  EXPECT_EQ(check(g, "bddeffff"), Verdict::kReject);
  EXPECT_EQ(check(g, "bdef"), Verdict::kReject);
  EXPECT_EQ(check(g, "bddefgg"), Verdict::kReject);
  EXPECT_EQ(check(g, "bcc"), Verdict::kReject);
}

TEST(GrammarMatcher, ClassesNegationAnyAndEscapes) {
  auto g = gbnf(R"g(root ::= [a-c0-9] [^x\n] . "\x41\u00e9\U0001F600\t\"\\" [\]\-])g");
  EXPECT_EQ(check(g, "a!\nA\xC3\xA9\xF0\x9F\x98\x80\t\"\\]"), Verdict::kAccept);
  EXPECT_EQ(check(g, "9\xC3\xA9zA\xC3\xA9\xF0\x9F\x98\x80\t\"\\-"), Verdict::kAccept);
  EXPECT_EQ(check(g, "ax"), Verdict::kReject);
  EXPECT_EQ(check(g, "a\n"), Verdict::kReject);
  EXPECT_EQ(check(g, "d"), Verdict::kReject);
  // A multi-byte character is a prefix after its lead byte, refused when malformed.
  EXPECT_EQ(check(g, "a\xC3"), Verdict::kPrefix);
  EXPECT_EQ(check(g, "a\xC3("), Verdict::kReject);
  EXPECT_EQ(check(g, "a\xED\xA0\x80"), Verdict::kReject);  // a surrogate is not UTF-8
  EXPECT_EQ(check(g, "a\xC0\x80"), Verdict::kReject);      // nor an overlong form
}

TEST(GrammarMatcher, RecursionAndMultiLineRules) {
  auto g = gbnf(R"g(
root ::= expr
expr ::= term
    ("+" term)*
term ::=
    [0-9]+
  | "(" expr ")"
)g");
  EXPECT_EQ(check(g, "1+(2+34)+5"), Verdict::kAccept);
  EXPECT_EQ(check(g, "((((1))))"), Verdict::kAccept);
  EXPECT_EQ(check(g, "((1)"), Verdict::kPrefix);
  EXPECT_EQ(check(g, "1+"), Verdict::kPrefix);
  EXPECT_EQ(check(g, "1++"), Verdict::kReject);
  EXPECT_EQ(check(g, ")"), Verdict::kReject);
}

TEST(GrammarMatcher, EqualStatesAreEqualValues) {
  auto g = gbnf(R"g(root ::= "[" [a-z]* "]")g");
  GrammarMatcher a(g), b(g);
  ASSERT_TRUE(a.feed("[ab"));
  ASSERT_TRUE(b.feed("[xyzq"));
  EXPECT_EQ(a.state(), b.state());  // a loop does not grow the stacks
  GrammarMatcher c(g);
  ASSERT_TRUE(c.feed("["));
  EXPECT_EQ(a.state(), c.state());
}

TEST(GrammarMatcher, XGrammarSpellingsAreTaken) {
  auto g = compile_grammar_text(GrammarDialect::kEbnf,
                                "root ::= 'yes' | \"no\" | maybe_not\nmaybe_not ::= \"m\"{1,2}");
  EXPECT_EQ(check(g, "yes"), Verdict::kAccept);
  EXPECT_EQ(check(g, "mm"), Verdict::kAccept);
  EXPECT_EQ(check(g, "mmm"), Verdict::kReject);
}

TEST(GrammarMatcher, RefusalsNameTheRuleOrPosition) {
  const auto gb = GrammarDialect::kGbnf;
  EXPECT_NE(error_of(gb, "root ::= item\nitem ::= missing")
                .find("rule 'item' refers to the undefined rule 'missing' (line 2, column 10)"),
            std::string::npos);
  EXPECT_NE(error_of(gb, "expr ::= \"x\"").find("no rule 'root'"), std::string::npos);
  EXPECT_NE(error_of(gb, "root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"")
                .find("rule 'expr' is left-recursive"),
            std::string::npos);
  EXPECT_NE(
      error_of(gb, "root ::= a\na ::= b? \"x\" | \"y\"\nb ::= a \"z\"").find("left-recursive"),
      std::string::npos);
  EXPECT_NE(error_of(gb, "root ::= (\"a\"?)*").find("rule 'root' repeats"), std::string::npos);
  EXPECT_NE(
      error_of(gb, "root ::= \"x\" loop\nloop ::= \"y\" loop").find("rule 'loop' can never finish"),
      std::string::npos);
  EXPECT_NE(error_of(gb, "root ::= \"abc").find("never closed (line 1, column 10)"),
            std::string::npos);
  EXPECT_NE(error_of(gb, "root ::= [a-z").find("'[' that is never closed"), std::string::npos);
  EXPECT_NE(error_of(gb, "root ::= (\"a\"").find("'(' that is never closed"), std::string::npos);
  EXPECT_NE(error_of(gb, "root ::= \"\\q\"").find("unknown escape '\\q' (line 1, column 11)"),
            std::string::npos);
  EXPECT_NE(error_of(gb, "root ::= \"a\"{3,2}").find("n < m"), std::string::npos);
  EXPECT_NE(error_of(gb, "root ::= \"a\"\nroot ::= \"b\"").find("defines rule 'root' twice"),
            std::string::npos);
  EXPECT_NE(error_of(gb, "root ::= (= \"a\") \"a\"").find("lookahead"), std::string::npos);
  EXPECT_NE(error_of(gb, "root ::= \"a\" ]").find("unexpected character ']'"), std::string::npos);
  EXPECT_NE(error_of(gb, "root \"a\"").find("expects '::='"), std::string::npos);
  // Repetitions that expand past the compile budget.
  // (Nested ones add up rather than multiply: a repetition refers to its item's rule.)
  std::string many = "root ::=";
  for (int i = 0; i < 12000; ++i) many += " \"a\"{0,9999}";
  EXPECT_NE(error_of(gb, many).find("budget: needs more than"), std::string::npos);
}

TEST(GrammarMatcher, ChainsOfEmptyRulesAreBounded) {
  // A bounded repetition of something that can be empty: one parse per count before a byte.
  auto fine = gbnf(R"g(root ::= ("a"?){0,100} "b")g");
  EXPECT_EQ(check(fine, "aab"), Verdict::kAccept);
  EXPECT_EQ(check(fine, std::string(100, 'a') + "b"), Verdict::kAccept);
  EXPECT_EQ(check(fine, std::string(101, 'a') + "b"), Verdict::kReject);
  // Exponentially many ways through empty rules to the same stacks: each stack is expanded once.
  auto nested = gbnf(R"g(root ::= (("a"?)?){0,60} "b")g");
  EXPECT_EQ(check(nested, std::string(60, 'a') + "b"), Verdict::kAccept);
  EXPECT_EQ(check(nested, std::string(61, 'a')), Verdict::kReject);
  // More parses at once than the matcher keeps, before the first byte: refused when compiled.
  EXPECT_NE(error_of(GrammarDialect::kGbnf, R"g(root ::= ("a"?){0,300} "b")g")
                .find("too ambiguous or nests too deep"),
            std::string::npos);
}

TEST(GrammarMatcher, DeepNestingIsBounded) {
  auto g = gbnf(R"g(root ::= "(" root ")" | "x")g");
  std::string deep(kMaxGrammarDepth + 10, '(');
  EXPECT_EQ(check(g, std::string(100, '(') + "x" + std::string(100, ')')), Verdict::kAccept);
  EXPECT_EQ(check(g, deep), Verdict::kReject);
}

TEST(RegexGrammar, WholeMatchOverEveryCharacter) {
  auto g = compile_grammar_text(GrammarDialect::kRegex, R"g((yes|no)\n[0-9]{2,3}\.?)g");
  EXPECT_EQ(check(g, "yes\n12"), Verdict::kAccept);
  EXPECT_EQ(check(g, "no\n123."), Verdict::kAccept);
  EXPECT_EQ(check(g, "no\n1"), Verdict::kPrefix);
  EXPECT_EQ(check(g, "no\n1234"), Verdict::kReject);
  EXPECT_EQ(check(g, "xyes\n12"), Verdict::kReject);  // no search: the whole output matches
  auto dot = compile_grammar_text(GrammarDialect::kRegex, "^a.c$");
  EXPECT_EQ(check(dot, "a\tc"), Verdict::kAccept);
  EXPECT_EQ(check(dot,
                  "a\xF0\x9F\x98\x80"
                  "c"),
            Verdict::kAccept);
  EXPECT_EQ(check(dot, "a\nc"), Verdict::kReject);
  auto neg = compile_grammar_text(GrammarDialect::kRegex, "[^a]+");
  EXPECT_EQ(check(neg, "\n\r\x01"), Verdict::kAccept);
  EXPECT_NE(error_of(GrammarDialect::kRegex, "(?=a)").find("regex uses '(?'"), std::string::npos);
}

TEST(GrammarCache, SameTextSameCompiledGrammar) {
  auto a = compile_grammar_cached(GrammarDialect::kGbnf, "root ::= \"q\"+");
  auto b = compile_grammar_cached(GrammarDialect::kGbnf, "root ::= \"q\"+");
  auto c = compile_grammar_cached(GrammarDialect::kEbnf, "root ::= \"q\"+");
  EXPECT_EQ(a.get(), b.get());
  EXPECT_NE(a.get(), c.get());  // the dialect is part of the key
}

}  // namespace
}  // namespace kiln::engine

#include "kiln/model/tokenizer_pretypes.h"

namespace kiln::model {
namespace {

// llama.cpp runs most regexes with std::regex on a text whose non-ASCII characters are first
// collapsed to one byte per Unicode category; PCRE2 with UCP on the text itself gives the same
// splits (the test set checks it). Where llama.cpp's rewrite of a tokenizer.json regex changes
// what matches, the rewrite is what is run here: case-insensitive contractions as explicit
// [sS] pairs (PCRE2's caseless 's' would also take U+017F), and \p{Lu}, \p{Ll}, \p{Lt}, \p{Lm},
// \p{Lo} as \p{L} (the collapse knows only "letter"). \d is written [0-9]: llama.cpp's
// std::regex matches ASCII digits only, PCRE2's UCP \d every decimal digit.

// GPT-2's regex. llama.cpp states it without the final \s+ but its hand-written splitter for it
// ends with that alternative; with the text between matches kept, the two split alike.
constexpr std::string_view kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Llama 3: contractions, letters with one leading non-letter, digits by three.
constexpr std::string_view kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Hf =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen 2: as Llama 3, every digit on its own.
constexpr std::string_view kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Hf =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen 3.5: as Qwen 2 with combining marks (\p{M}) part of words.
constexpr std::string_view kQwen35 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen35Hf =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Jais 2: Llama 3 with whitespace runs cut into power-of-two lengths.
constexpr std::string_view kJais2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})";
// GPT-4o / o200k: words split at lower-to-upper case changes, contractions attached.
constexpr std::string_view kGpt4o =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Mistral's tekken: GPT-4o's case split without contractions, digits one by one.
constexpr std::string_view kTekken =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Granite multilingual embedding (97m): GPT-4o's with combining marks inside words.
constexpr std::string_view kGraniteEmbMulti =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))*((?=[\p{L}\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))+((?=[\p{L}\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// DeepSeek V3 (and Hunyuan dense, JoyAI, HY v4): digits by three, CJK runs, then words.
constexpr std::string_view kDeepseek3Words =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kCjkKana = R"([一-龥぀-ゟ゠-ヿ]+)";
// Poro, BLOOM, GPT-3 Finnish: runs of anything but whitespace and a few punctuation marks.
constexpr std::string_view kBloom = R"( ?[^(\s|.,!?…。，、।۔،)]+)";
// Split at newlines only (the SentencePiece-style BPEs merge across spaces).
constexpr std::string_view kNewlineRuns = R"([^\n]+|[\n]+)";

// The rows are llama.cpp's types (src/llama-vocab.cpp, llm_tokenizer_bpe and the
// tokenizer.ggml.pre name table of llama_vocab::impl::load), in its order.
std::vector<PreTokenizerType> build_table() {
  using T = PreTokenizerType;
  std::vector<T> t;
  // Files without tokenizer.ggml.pre (older converters: GPT-NeoX, Aquila) get this one.
  t.push_back(T{.type = "DEFAULT",
                .names = {"default"},
                .regexes = {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}});
  t.push_back(T{.type = "LLAMA3",
                .names = {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
                          "midm-2.0", "lfm2", "jina-v5-nano"},
                .regexes = {kLlama3},
                .hf_regex = kLlama3Hf,
                .ignore_merges = true,
                .add_bos = true});
  // Letters by explicit ranges. Characters that Unicode normalization would change (U+1F7D,
  // U+212A, ...) are written \x{...} so that no editor or tool turns them into others.
  t.push_back(T{
      .type = "DEEPSEEK_LLM",
      .names = {"deepseek-llm"},
      .regexes = {
          "[\r\n]",
          R"(\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\x{1F7D}ᾀ-ᾴᾶ-ᾼ\x{1FBE}ῂ-ῄῆ-ῌῐ-\x{1FD3}ῖ-\x{1FDB}ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\x{2126}ℨ\x{212A}-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+)",
          R"(\s?[!-/:-~！-／：-～‘-‟　-。]+)",
          R"(\s+$)",
          R"([一-龥ࠀ-一가-퟿]+)",
          R"(\p{N}+)",
      }});
  t.push_back(T{.type = "DEEPSEEK_CODER",
                .names = {"deepseek-coder"},
                .regexes = {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", R"([一-龥ࠀ-一가-퟿]+)",
                            R"(\p{N})"}});
  t.push_back(T{.type = "FALCON",
                .names = {"falcon"},
                .regexes = {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"}});
  t.push_back(T{.type = "MPT", .names = {"mpt"}, .regexes = {kGpt2}});
  t.push_back(T{.type = "STARCODER", .names = {"starcoder"}, .regexes = {R"(\p{N})", kGpt2}});
  t.push_back(T{.type = "GPT2",
                .names = {"gpt-2", "gpt2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es",
                          "jina-v2-de", "a.x-4.0", "mellum", "modern-bert", "exaone4"},
                .regexes = {kGpt2},
                .hf_regex = kGpt2});
  t.push_back(T{.type = "GPT2",
                .names = {"jina-v1-en", "jina-v2-code", "roberta-bpe"},
                .regexes = {kGpt2},
                .refusal = "RoBERTa-style encoders append a separator token, which kiln's "
                           "tokenizer does not model"});
  t.push_back(T{.type = "REFACT", .names = {"refact"}, .regexes = {R"(\p{N})", kGpt2}});
  t.push_back(T{.type = "COMMAND_R", .names = {"command-r"}, .regexes = {R"(\p{N})", kGpt2}});
  t.push_back(T{.type = "STABLELM2", .names = {"stablelm2"}, .regexes = {kQwen2}});
  t.push_back(T{.type = "QWEN2",
                .names = {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez"},
                .regexes = {kQwen2},
                .hf_regex = kQwen2Hf});
  t.push_back(T{.type = "OLMO", .names = {"olmo"}, .regexes = {kGpt2}});
  t.push_back(T{.type = "DBRX", .names = {"dbrx"}, .regexes = {kLlama3}});
  t.push_back(T{.type = "SMAUG", .names = {"smaug-bpe"}, .regexes = {kLlama3}});
  t.push_back(T{.type = "PORO", .names = {"poro-chat"}, .regexes = {kBloom}});
  t.push_back(T{.type = "CHATGLM4", .names = {"chatglm-bpe"}, .regexes = {kLlama3}});
  t.push_back(T{
      .type = "CHATGLM4", .names = {"glm4", "glm5"}, .regexes = {kLlama3}, .ignore_merges = true});
  t.push_back(T{.type = "VIKING", .names = {"viking"}, .regexes = {kBloom, R"(\p{N})"}});
  t.push_back(T{.type = "JAIS", .names = {"jais"}, .regexes = {kGpt2}});
  t.push_back(T{.type = "TEKKEN",
                .names = {"tekken"},
                .regexes = {kTekken},
                .ignore_merges = true,
                .add_bos = true});
  t.push_back(T{.type = "SMOLLM", .names = {"smollm"}, .regexes = {R"(\p{N})", kGpt2}});
  t.push_back(T{.type = "CODESHELL", .names = {"codeshell"}, .regexes = {R"(\p{N})", kGpt2}});
  t.push_back(T{.type = "BLOOM", .names = {"bloom"}, .regexes = {kBloom}});
  t.push_back(T{.type = "GPT3_FINNISH", .names = {"gpt3-finnish"}, .regexes = {kBloom}});
  t.push_back(T{.type = "EXAONE", .names = {"exaone"}, .regexes = {R"(\p{N})", kGpt2}});
  t.push_back(T{.type = "CHAMELEON",
                .names = {"chameleon"},
                .regexes = {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
                            "([\\t\\n]|    |  )", R"(\p{N})", R"([\p{P}!-/:-@\[-`{-~])", kGpt2},
                .add_bos = true});
  t.push_back(T{.type = "MINERVA", .names = {"minerva-7b"}, .regexes = {R"(\p{N})", kGpt2}});
  t.push_back(T{.type = "DEEPSEEK3_LLM",
                .names = {"deepseek-v3"},
                .regexes = {R"(\p{N}{1,3})", kCjkKana, kDeepseek3Words}});
  t.push_back(
      T{.type = "GPT4O", .names = {"gpt-4o", "llama4", "kanana2", "talkie"}, .regexes = {kGpt4o}});
  // The second regex only ever matches empty: it marks cuts before each group of three digits
  // counted from the right.
  t.push_back(T{.type = "SUPERBPE",
                .names = {"superbpe"},
                .regexes = {R"(\p{N}+)", R"((?=([0-9]{3})+(?![0-9])))"}});
  t.push_back(T{.type = "TRILLION", .names = {"trillion"}, .regexes = {kGpt2}});
  t.push_back(T{
      .type = "BAILINGMOE",
      .names = {"bailingmoe", "bailingmoe2", "llada-moe"},
      .regexes = {
          R"('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)"}});
  t.push_back(T{
      .type = "SEED_CODER",
      .names = {"seed-coder"},
      .regexes = {
          R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)"}});
  t.push_back(T{.type = "HUNYUAN", .names = {"hunyuan"}, .regexes = {kQwen2}});
  t.push_back(T{.type = "KIMI_K2",
                .names = {"kimi-k2"},
                .refusal = "llama.cpp splits Kimi K2's text with hand-written code (Han runs and "
                           "case-split words excluding Han), not a regex; kiln has no check for "
                           "a port of it"});
  t.push_back(T{.type = "HUNYUAN_DENSE",
                .names = {"hunyuan-dense"},
                .regexes = {R"(\p{N}{1,3})", kCjkKana, kDeepseek3Words}});
  t.push_back(T{.type = "GROK_2", .names = {"grok-2"}, .regexes = {kQwen2}});
  t.push_back(T{.type = "GRANITE_DOCLING", .names = {"granite-docling"}, .regexes = {kGpt2}});
  t.push_back(T{.type = "MINIMAX_M2", .names = {"minimax-m2"}, .regexes = {kGpt4o}});
  t.push_back(T{.type = "AFMOE",
                .names = {"afmoe"},
                .refusal = "llama.cpp groups AFMoE's digits with hand-written code (by length "
                           "modulo 3), not a regex; kiln has no check for a port of it"});
  t.push_back(T{.type = "SOLAR_OPEN", .names = {"solar-open"}, .regexes = {kQwen2}});
  t.push_back(T{
      .type = "YOUTU",
      .names = {"youtu"},
      .regexes =
          {R"([가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+)",
           R"([^\r\n\p{L}\p{N}]?[\p{L}\p{M}]*[\p{L}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+[\p{L}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
      .ignore_merges = true});
  t.push_back(T{
      .type = "EXAONE_MOE",
      .names = {"exaone-moe"},
      .regexes = {
          R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)"}});
  t.push_back(
      T{.type = "QWEN35", .names = {"qwen35"}, .regexes = {kQwen35}, .hf_regex = kQwen35Hf});
  t.push_back(T{.type = "TINY_AYA",
                .names = {"tiny_aya", "cohere2moe"},
                .refusal = "llama.cpp replaces Tiny Aya's digit-grouping regex with hand-written "
                           "code of its own; kiln has no check for a port of it"});
  t.push_back(T{.type = "JOYAI_LLM",
                .names = {"joyai-llm"},
                .regexes = {R"(\p{N}{1,3})", kCjkKana, kDeepseek3Words}});
  t.push_back(T{.type = "JAIS2", .names = {"jais-2"}, .regexes = {kJais2}});
  // SentencePiece-style BPE in a gpt2-shaped file: spaces become U+2581 and only newlines cut.
  t.push_back(T{.type = "GEMMA4",
                .names = {"gemma4", "granite-embed-multi-311m"},
                .regexes = {kNewlineRuns},
                .force_add_bos = true,
                .byte_level = false,
                .newline_runs_whole = true});
  t.push_back(T{.type = "SARVAM_MOE",
                .names = {"sarvam-moe"},
                .regexes = {kNewlineRuns},
                .byte_level = false});
  t.push_back(T{
      .type = "MINICPM5",
      .names = {"minicpm5"},
      .regexes =
          {R"(\p{N}{1,3})",
           R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
      .ignore_merges = true});
  t.push_back(T{.type = "WHITESPACE",
                .names = {"whitespace"},
                .refusal = "the whitespace pre-tokenizer belongs to llama.cpp's 'whitespace' "
                           "tokenizer model (Jina v2 zh), which kiln does not implement"});
  t.push_back(T{.type = "GRANITE_EMB_MULTI",
                .names = {"granite-embed-multi-97m"},
                .regexes = {kGraniteEmbMulti},
                .ignore_merges = true});
  t.push_back(T{.type = "MELLUM2", .names = {"mellum2"}, .regexes = {R"(\p{N})", kGpt2}});
  t.push_back(T{.type = "LAGUNA", .names = {"laguna"}, .regexes = {kNewlineRuns, kQwen2}});
  t.push_back(T{.type = "HY_V4",
                .names = {"hy_v4"},
                .regexes = {R"(\p{N}{1,3})", kCjkKana, kDeepseek3Words}});
  t.push_back(T{
      .type = "SPARK2_5",
      .names = {"spark2_5"},
      .regexes = {
          R"(\p{N}{1,3})", kCjkKana,
          R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+)",
          R"(\p{N})"}});
  t.push_back(T{
      .type = "UFAKZEKA",
      .names = {"ufakzeka"},
      .regexes = {
          R"([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}});
  t.push_back(T{.type = "MMBERT",
                .names = {"mmbert"},
                .refusal = "mmBERT's pre-tokenizer also cuts words at every escaped space and "
                           "its encoder adds separators; kiln has no check for it"});
  return t;
}

}  // namespace

const std::vector<PreTokenizerType>& pretokenizer_types() {
  static const std::vector<PreTokenizerType> table = build_table();
  return table;
}

const PreTokenizerType* find_pretokenizer_type(std::string_view pre) {
  for (const PreTokenizerType& row : pretokenizer_types()) {
    for (std::string_view name : row.names) {
      if (name == pre) return &row;
    }
  }
  return nullptr;
}

const PreTokenizerType* find_pretokenizer_type_by_hf_regex(std::string_view regex) {
  if (regex.empty()) return nullptr;
  for (const PreTokenizerType& row : pretokenizer_types()) {
    if (row.hf_regex == regex) return &row;
  }
  return nullptr;
}

}  // namespace kiln::model

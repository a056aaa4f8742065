"""Builds the embedding oracle fixtures: tiny random-weight BERT sentence-embedding folders with
what `transformers` / `sentence-transformers` make of a varied text set, and the reference
embeddings of the real all-MiniLM-L6-v2 for a held set of 200 texts.

Run by hand, once, in a venv with torch + transformers + sentence-transformers (the oracle
venv; `pip install sentence-transformers`), after `kiln pull all-minilm-l6-v2`:

    .venv-oracle/bin/python3 tests/oracle/make_embedding_goldens.py [--minilm DIR]

It writes tests/oracle/embeddings/ and its SHA256SUMS; both are committed, so CI needs none of
those packages (tests/oracle/test_embedding_oracle.py runs kiln against them).

  <case>/model/          a sentence-transformers folder: config.json, model.safetensors (f32),
                         tokenizer.json (WordPiece trained here on GSM8K questions),
                         tokenizer_config.json, modules.json, 1_Pooling/config.json, maybe
                         sentence_bert_config.json
  <case>/golden.json     {"texts", "ids" (sentence-transformers' tokenizer, truncated as it
                         truncates), "embeddings" (SentenceTransformer.encode, the folder's own
                         pooling), "pooled": {mode: [...]} (float64 transformers hidden states,
                         pooled by mean/cls/last/max, not normalized), versions}
  decoder-qwen2.json     a decoder's final-norm hidden states of the qwen2 oracle fixture's
                         prompts, pooled by last token and mean (float64 transformers)
  minilm/texts.jsonl     the 200 held texts (one JSON string a line)
  minilm/embeddings.npy  SentenceTransformer(all-MiniLM-L6-v2).encode(texts), float32 [200, 384]
"""
import argparse
import hashlib
import json
import pathlib
import random

import numpy as np
import sentence_transformers
import tokenizers
import torch
import transformers

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OUT = HERE / "embeddings"
GSM8K = ROOT / "data" / "gsm8k" / "train.jsonl"

# Texts every case sees: unicode of many kinds, accents, CJK, Hangul, emoji, control and
# format characters, empty and whitespace-only, special tokens written in the text, and long
# ones past every truncation limit.
SPECIAL_TEXTS = [
    "",
    " ",
    "\t\n  \u3000 ",
    "Hello world",
    "HELLO, World!!! How are you?",
    "Héllo wörld, naïve café, señor, Ångström, façade",
    "İstanbul ΣΑΣ σας Straße ǅemal ﬁne Ⅳ",
    "日本語のテキストです。中文句子，还有标点！",
    "한국어 문장입니다. 서울은 크다",
    "emoji 😀 🫠 👍🏽 test ❤️ 🇫🇷",
    "Zero\u200bwidth\u00adsoft hyphen \u2028 line sep \x85 nel",
    "control\x01\x07chars and \ue000 private use and \u0378 unassigned",
    "math: x^2 + y_1 <= 3.14 * r; a|b ~c `code` {braces} [brackets] $5 & 100%",
    "hello [SEP] world [CLS] [unk] [UNK]x [MASK]",
    "Ωmega – em—dash “quotes” ‘single’ «guillemets» …",
    "Tiếng Việt có dấu, العربية, עברית, हिन्दी, ไทย",
    "supercalifragilisticexpialidocious" * 4,
    "a" * 150 + " short",
    "Mixed123numbers456and789letters 3.5kg 1,000,000",
    "\u00c5\u030a combining ring, e\u0301 e\u0300 n\u0303",
]


def gsm8k_questions(n, seed):
    qs = [json.loads(l)["question"] for l in GSM8K.read_text().splitlines()]
    return random.Random(seed).sample(qs, n)


def long_texts(n, seed):
    """Several questions joined: past 256 tokens (and past every tiny model's limit)."""
    qs = gsm8k_questions(60, seed)
    return [" ".join(qs[i * 6:(i + 1) * 6]) for i in range(n)]


def train_tokenizer(folder, post_processor):
    from tokenizers import processors
    from tokenizers.implementations import BertWordPieceTokenizer
    tok = BertWordPieceTokenizer(lowercase=True)
    tok.train_from_iterator(gsm8k_questions(3000, 1), vocab_size=1200, min_frequency=2,
                            limit_alphabet=200)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    if post_processor == "template":  # as the real all-MiniLM-L6-v2 has it
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    else:
        tok.post_processor = processors.BertProcessing(("[SEP]", sep), ("[CLS]", cls))
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "BertTokenizer", "do_lower_case": True, "unk_token": "[UNK]",
        "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
        "mask_token": "[MASK]"}, indent=2))
    return transformers.PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"))


CASES = [
    # Mean pooling + Normalize (all-MiniLM's recipe), truncation by sentence_bert_config.json.
    {"name": "bert-mean", "head": "BertModel", "act": "gelu", "pooling": "mean",
     "normalize": True, "max_seq_length": 40, "post_processor": "template"},
    # CLS pooling, no Normalize, BertForMaskedLM weights ("bert." prefix), tanh GELU, no
    # sentence_bert_config.json: truncation at max_position_embeddings; BertProcessing.
    {"name": "bert-cls", "head": "BertForMaskedLM", "act": "gelu_new", "pooling": "cls",
     "normalize": False, "max_seq_length": None, "post_processor": "bert"},
]
POOLING_KEYS = {"mean": "pooling_mode_mean_tokens", "cls": "pooling_mode_cls_token",
                "last": "pooling_mode_lasttoken", "max": "pooling_mode_max_tokens"}


def make_case(case):
    folder = OUT / case["name"] / "model"
    folder.mkdir(parents=True, exist_ok=True)
    hf_tok = train_tokenizer(folder, case["post_processor"])
    torch.manual_seed(7)
    config = transformers.BertConfig(
        vocab_size=len(hf_tok), hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, max_position_embeddings=64, type_vocab_size=2,
        hidden_act=case["act"], initializer_range=0.2, layer_norm_eps=1e-12)
    model = getattr(transformers, case["head"])(config).eval()
    with torch.no_grad():  # biases and norms away from their 0/1 init, so each one matters
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.3)
    model.save_pretrained(folder, safe_serialization=True)
    (folder / "modules.json").write_text(json.dumps(
        [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
         {"idx": 1, "name": "1", "path": "1_Pooling",
          "type": "sentence_transformers.models.Pooling"}] +
        ([{"idx": 2, "name": "2", "path": "2_Normalize",
           "type": "sentence_transformers.models.Normalize"}] if case["normalize"] else []),
        indent=2))
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 64,
         **{key: mode == case["pooling"] for mode, key in POOLING_KEYS.items()},
         "pooling_mode_mean_sqrt_len_tokens": False}, indent=2))
    if case["max_seq_length"]:
        (folder / "sentence_bert_config.json").write_text(json.dumps(
            {"max_seq_length": case["max_seq_length"], "do_lower_case": False}))

    texts = SPECIAL_TEXTS + gsm8k_questions(12, 2) + long_texts(4, 3)
    st = sentence_transformers.SentenceTransformer(str(folder), device="cpu")
    limit = st.max_seq_length
    ids = [st.tokenizer(t, truncation=True, max_length=limit)["input_ids"] for t in texts]
    embeddings = st.encode(texts, batch_size=8, convert_to_numpy=True)
    # The float64 hidden states of the same inputs, pooled every way.
    encoder = transformers.BertModel.from_pretrained(folder, attn_implementation="eager")
    encoder = encoder.double().eval()
    pooled = {m: [] for m in POOLING_KEYS}
    with torch.no_grad():
        for seq in ids:
            h = encoder(input_ids=torch.tensor([seq])).last_hidden_state[0]
            pooled["mean"].append(h.mean(0).tolist())
            pooled["cls"].append(h[0].tolist())
            pooled["last"].append(h[-1].tolist())
            pooled["max"].append(h.max(0).values.tolist())
    golden = {"case": case["name"], "texts": texts, "max_seq_length": limit, "ids": ids,
              "embeddings": embeddings.tolist(), "pooling": case["pooling"],
              "normalize": case["normalize"], "pooled": pooled,
              "versions": {"transformers": transformers.__version__,
                           "sentence_transformers": sentence_transformers.__version__,
                           "tokenizers": tokenizers.__version__, "torch": torch.__version__}}
    (OUT / case["name"] / "golden.json").write_text(json.dumps(golden))


def held_texts():
    """200 texts: the special ones, 10 past 256 tokens, GSM8K questions (some shouted, some
    with their accents and punctuation doubled)."""
    rng = random.Random(11)
    base = gsm8k_questions(170, 12)
    varied = []
    for i, q in enumerate(base):
        if i % 7 == 0:
            q = q.upper()
        elif i % 7 == 1:
            q = q.replace("e", "é").replace("a", "à")
        elif i % 7 == 2:
            q = q + " " + rng.choice(["日本", "🙂", "Ünïcödé", "한글", "¿Qué?"])
        varied.append(q)
    return SPECIAL_TEXTS + long_texts(10, 13) + varied


def make_minilm(folder):
    texts = held_texts()
    assert len(texts) == 200
    out = OUT / "minilm"
    out.mkdir(parents=True, exist_ok=True)
    (out / "texts.jsonl").write_text("".join(json.dumps(t) + "\n" for t in texts))
    st = sentence_transformers.SentenceTransformer(str(folder), device="cpu")
    np.save(out / "embeddings.npy", st.encode(texts, batch_size=16, convert_to_numpy=True)
            .astype(np.float32))


def make_decoder(case="qwen2"):
    """A decoder's embeddings: the final-norm hidden states (float64 transformers) of the
    oracle fixture's prompts, pooled by last token and by mean (kiln embed on its GGUF)."""
    data = HERE / "data" / case
    prompts = [p["ids"] for p in json.loads((data / "golden.json").read_text())["prompts"]]
    model = transformers.AutoModel.from_pretrained(data / "hf", attn_implementation="eager")
    model = model.double().eval()
    pooled = {"last": [], "mean": []}
    with torch.no_grad():
        for ids in prompts:
            h = model(input_ids=torch.tensor([ids])).last_hidden_state[0]
            pooled["last"].append(h[-1].tolist())
            pooled["mean"].append(h.mean(0).tolist())
    (OUT / f"decoder-{case}.json").write_text(json.dumps(
        {"case": case, "gguf": f"tests/oracle/data/{case}/model.f32.gguf", "ids": prompts,
         "pooled": pooled, "transformers": transformers.__version__}))


def write_sums():
    files = sorted(p for p in OUT.rglob("*") if p.is_file() and p.name != "SHA256SUMS")
    (OUT / "SHA256SUMS").write_text("".join(
        f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.relative_to(OUT)}\n" for p in files))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minilm", type=pathlib.Path,
                        default=pathlib.Path.home() / ".cache/kiln/models/all-minilm-l6-v2")
    args = parser.parse_args()
    for case in CASES:
        make_case(case)
    make_decoder()
    make_minilm(args.minilm)
    write_sums()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Train a small byte-level BPE tokenizer the way Qwen2 and Qwen3 tokenize, and save it with the
Python `tokenizers` library's ids and decodes for a corpus, as the fixture the C++ tokenizer
(host/tokenizer.*) is tested against (DESIGN.md, "Text": the library is the arbiter).

No package on the registries ships a real Qwen tokenizer.json small enough to commit (Qwen's is
about 7 MB), so this one is trained here with Qwen's exact pipeline: NFC normalizer, the Split
pre-tokenizer with Qwen2's regex (behavior Isolated), then ByteLevel without its own regex, the
BPE model over all 256 byte symbols, the ByteLevel decoder and post-processor, and Qwen's
special tokens appended after the learned vocabulary as added special tokens (plus one added
token that is not special, as Qwen3's <think> is).

It needs only `tokenizers` (not torch or transformers, which scripts/make_hf_fixtures.py needs
for the model fixtures), and is deterministic: the training text comes from a seeded generator.

Writes OUT/NAME/:
  tokenizer.json   the trained tokenizer, as Tokenizer.save writes it (a checkpoint's file)
  corpus.json      lines: [{text, ids, decoded, decoded_skip_special}], where ids =
                   encode(text).ids, decoded = decode(ids, skip_special_tokens=False) and
                   decoded_skip_special = decode(ids, skip_special_tokens=True); versions
  meta.json        the settings, the vocabulary size, the versions
and FUZZ_SEED (tests/fuzz/seeds/tokenizer/qwen2-mini.json): the tokenizer cut to its 256 byte
symbols, its first FUZZ_SEED_MERGES merges and <|im_end|>, a seed small enough for the fuzz
harness to mutate quickly (docs/fuzzing.md).

Usage:
  python3 -m venv build-fixtures-venv
  build-fixtures-venv/bin/pip install -r scripts/requirements-fixtures.txt
  build-fixtures-venv/bin/python scripts/make_tokenizer_fixture.py [--out tests/fixtures]
"""

import argparse
import json
import os
import random
import sys

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, \
    processors, trainers

# ---------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------

NAME = "qwen2-bpe-tokenizer"
# Qwen2's (and Qwen3's) pre-tokenizer regex, as in their tokenizer.json.
QWEN2_SPLIT_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                     r"\s*[\r\n]+|\s+(?!\S)|\s+")
VOCAB_SIZE = 3000             # learned vocabulary: 256 byte symbols and the merges
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # Qwen's, appended in this order
ADDED_TOKENS = ["<think>", "</think>"]                            # added, not special (as Qwen3's)
TRAIN_SEED = 61
FUZZ_SEED = "tests/fuzz/seeds/tokenizer/qwen2-mini.json"
FUZZ_SEED_MERGES = 24
TRAIN_LINES = 4000

# Pieces the generated training text is made of, so that the merges cover every kind of text the
# corpus holds.
SYLLABLES = ["th", "e", "an", "in", "er", "on", "re", "at", "st", "en", "ing", "ou", "al", "is", "or",
             "de", "co", "pro", "ta", "ti", "ve", "me", "ly", "tion", "ch", "sh", "qu", "x", "z", "k"]
CHINESE = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该铁价严龙飞"
EMOJI = ["😀", "🚀", "🎉", "👍🏽", "👨‍👩‍👧", "🇨🇳", "❤️", "🤖", "🧪", "✨"]
CODE = ["def f(x):\n    return x * 2\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
        "if x != None and y >= 3:\n        print(f'{x}')\n", "#include <vector>\nint main() { return 0; }\n",
        "const auto [a, b] = std::pair{1, 2};\n", "SELECT id, name FROM users WHERE id = 42;\n",
        "<div class=\"a\">text</div>\n", "x = {'key': [1, 2, 3], \"other\": None}\n"]
WORDS = ["the", "The", "and", "of", "to", "in", "is", "it", "you", "that", "he", "was", "for", "on", "are",
         "with", "as", "I", "his", "they", "be", "at", "one", "have", "this", "from", "or", "had", "by",
         "word", "but", "what", "some", "we", "can", "out", "other", "were", "all", "there", "when", "up",
         "use", "your", "how", "said", "an", "each", "she", "which", "do", "their", "time", "if", "will",
         "model", "token", "decode", "graph", "kernel", "tensor", "weight", "layer", "Qwen", "Spindle",
         "don't", "I'm", "we've", "you'll", "she'd", "it's", "they're", "DON'T", "café", "naïve", "über",
         "Straße", "résumé", "Ελληνικά", "русский", "日本語", "한국어", "العربية", "हिन्दी"]

# The corpus every C++ test encodes and decodes: Chinese, emoji, code, runs of spaces, tabs and
# newlines, trailing spaces, special and added tokens inside text, numbers, contractions, mixed
# scripts, text NFC changes, and whitespace Unicode has beyond ASCII (and U+180E, which it no
# longer counts as whitespace).
CORPUS = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "我们的模型在单批次解码中运行得很快。",
    "中文和English混合的句子，还有数字123和标点！",
    "Emoji: 😀🚀🎉 👍🏽 👨‍👩‍👧 🇨🇳 ❤️",
    "def add(a, b):\n    return a + b\n",
    "for (int i = 0; i < 10; ++i) {\n\tprintf(\"%d\\n\", i);\n}",
    "    leading spaces and trailing spaces    ",
    "tabs\t\tand\ttabs\t",
    "newlines\n\n\nand\r\nCRLF\r\n",
    "mixed \t \n whitespace \n\t runs  \n",
    "   ",
    "\n",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|><|endoftext|>",
    "text<|endoftext|>more text",
    "<|im_start|><|im_end|>",
    "<think>\nreasoning here\n</think>\n\nthe answer",
    "a <|im_end|> inside, and a broken <|im_end| one",
    "Numbers: 0 7 42 3.14159 1,000,000 2026-12-03 0x1F",
    "1234567890",
    "I'm sure they'll say we've done what you'd've DONE, isn't it? IT'S ok.",
    "Don't   STOP 'til you're through",
    "Ελληνικά, русский, 日本語, 한국어, العربية, हिन्दी",
    "café naïve über Straße résumé",
    "cafe\u0301 and e\u0308 and A\u030a: combining marks that NFC composes",
    "\u00a0non-breaking\u00a0spaces\u2003em\u2003space\u3000ideographic",
    "line\u2028separator and next\u0085line",
    "U+180E\u180e's no space to the library\u180e  but\u200bzero-width\ufeffmarks",
    "snake_case_name = CamelCaseName.method_call(arg_1, **kwargs)",
    "!!!??? ... --- === *** ###",
    "URL: https://example.com/path?query=1&other=two#frag",
    "a",
    "",
    "\u00ff\u00fe\x01\x7f control and latin-1",
    "零一二三四五六七八九十百千万亿",
    "‘curly quotes’ “double” — dashes – and … ellipsis",
]

# ---------------------------------------------------------------------------------------------
# Build
# ---------------------------------------------------------------------------------------------


def training_text():
    """TRAIN_LINES lines mixing the pieces above, from a seeded generator."""
    rng = random.Random(TRAIN_SEED)
    lines = []
    for _ in range(TRAIN_LINES):
        kind = rng.randrange(5)
        if kind == 0:
            lines.append(" ".join(rng.choice(WORDS) for _ in range(rng.randrange(3, 15))) + rng.choice([".", ",", "!", "?", ""]))
        elif kind == 1:
            lines.append("".join(rng.choice(CHINESE) for _ in range(rng.randrange(4, 30))) + rng.choice(["。", "，", "！", ""]))
        elif kind == 2:
            lines.append(rng.choice(CODE))
        elif kind == 3:
            lines.append(" ".join("".join(rng.choice(SYLLABLES) for _ in range(rng.randrange(1, 4)))
                                  for _ in range(rng.randrange(3, 12))))
        else:
            lines.append(" ".join([str(rng.randrange(10 ** rng.randrange(1, 6))), rng.choice(EMOJI),
                                   rng.choice(WORDS), " " * rng.randrange(1, 6), "\t" * rng.randrange(0, 3)]))
    return lines


def make_tokenizer():
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    tok.train_from_iterator(training_text(), trainer=trainer)
    # Appended after the learned vocabulary, as in Qwen's files.
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED_TOKENS])
    return tok


def write_fuzz_seed(tokenizer_path, out):
    """The tokenizer at tokenizer_path cut down (FUZZ_SEED), ids renumbered densely."""
    t = json.load(open(tokenizer_path, encoding="utf-8"))
    kept = [k for k, v in sorted(t["model"]["vocab"].items(), key=lambda kv: kv[1]) if v < 256]
    merges = []
    for left, right in t["model"]["merges"]:
        if len(merges) == FUZZ_SEED_MERGES:
            break
        if left in kept and right in kept:
            kept.append(left + right)
            merges.append([left, right])
    t["model"]["vocab"] = {k: i for i, k in enumerate(kept)}
    t["model"]["merges"] = merges
    t["added_tokens"] = [dict(a, id=len(kept)) for a in t["added_tokens"] if a["content"] == "<|im_end|>"]
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        f.write(json.dumps(t, ensure_ascii=False, indent=1) + "\n")
    Tokenizer.from_file(out)  # the library reads it


def build(out_root):
    d = os.path.join(out_root, NAME)
    os.makedirs(d, exist_ok=True)
    tok = make_tokenizer()
    path = os.path.join(d, "tokenizer.json")
    tok.save(path)
    # The references come from the file as the library reads it back.
    tok = Tokenizer.from_file(path)
    lines = []
    for text in CORPUS:
        ids = tok.encode(text).ids
        lines.append(dict(text=text, ids=ids,
                          decoded=tok.decode(ids, skip_special_tokens=False),
                          decoded_skip_special=tok.decode(ids, skip_special_tokens=True)))
    versions = dict(tokenizers_version=tokenizers.__version__, python_version=sys.version.split()[0])
    with open(os.path.join(d, "corpus.json"), "w") as f:
        json.dump(dict(lines=lines, **versions), f, indent=1, ensure_ascii=False)
        f.write("\n")
    meta = dict(name=NAME, split_regex=QWEN2_SPLIT_REGEX, normalizer="NFC", vocab_size=VOCAB_SIZE,
                learned_vocab=tok.get_vocab_size(with_added_tokens=False),
                vocab_with_added=tok.get_vocab_size(with_added_tokens=True),
                special_tokens={t: tok.token_to_id(t) for t in SPECIAL_TOKENS},
                added_tokens={t: tok.token_to_id(t) for t in ADDED_TOKENS},
                train_seed=TRAIN_SEED, train_lines=TRAIN_LINES, **versions)
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, ensure_ascii=False)
        f.write("\n")
    write_fuzz_seed(path, FUZZ_SEED)
    roundtrip = sum(line["decoded"] == line["text"] for line in lines)
    print(f"== {NAME} -> {d}: vocabulary {meta['learned_vocab']} + {len(SPECIAL_TOKENS) + len(ADDED_TOKENS)} added, "
          f"{len(lines)} corpus lines, {roundtrip} decode back to their text, tokenizers {tokenizers.__version__}")
    for fn in sorted(os.listdir(d)):
        print(f"   {os.path.getsize(os.path.join(d, fn)):>9d}  {fn}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="tests/fixtures", help="output root (default tests/fixtures)")
    build(ap.parse_args().out)


if __name__ == "__main__":
    main()

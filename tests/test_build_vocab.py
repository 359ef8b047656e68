"""build_vocab: the WoBERT recipe (reachable BERT-Chinese tokens + the most frequent jieba words of a corpus)."""

import json
import subprocess
import sys
import unicodedata
from collections import Counter

import jieba
import pytest
from conftest import BERT_VOCAB, peoples_daily_file

from roformer_hf import RoFormerJiebaTokenizer
from roformer_hf.build_vocab import main

NUM_WORDS = 500


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """People's Daily's first 3,000 paragraphs where the full data is present, else the sample's 1,200: two thirds
    as plain text, the rest as JSON lines."""
    folder = tmp_path_factory.mktemp("corpus")
    lines = peoples_daily_file().read_text(encoding="utf-8").splitlines()[:3000]
    cut = len(lines) * 2 // 3
    (folder / "news.txt").write_text("\n".join(lines[:cut]) + "\n", encoding="utf-8")
    records = [json.dumps({"id": index, "text": line}, ensure_ascii=False) for index, line in enumerate(lines[cut:])]
    (folder / "more.jsonl").write_text("\n".join(records) + "\n", encoding="utf-8")
    return folder, lines


@pytest.fixture(scope="module")
def built(corpus):
    folder, _ = corpus
    output = folder / "out" / "vocab.txt"
    main(
        [
            "--corpus", str(folder / "news.txt"), str(folder / "more.jsonl"),
            "--base_vocab", str(BERT_VOCAB),
            "--num_words", str(NUM_WORDS),
            "--output", str(output),
        ]
    )  # fmt: skip
    return read_vocab(output)


CJK_RANGES = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F)]
CJK_RANGES += [(0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]


def is_cjk(character):
    return any(low <= ord(character) <= high for low, high in CJK_RANGES)


def read_vocab(path):
    # split("\n"), not splitlines(): BERT-Chinese has the token "\u2028", which splitlines() would cut
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def reference_word_counts(lines):
    """Word counts written independently: plain jieba on lowercased, accent-stripped text."""
    segmenter = jieba.Tokenizer()
    counts = Counter()
    for line in lines:
        text = unicodedata.normalize("NFD", line.strip().lower())
        text = "".join(character for character in text if unicodedata.category(character) != "Mn")
        counts.update(segmenter.cut(text, HMM=False))
    return counts


def test_keeps_the_reachable_base_tokens_in_order(built):
    base = read_vocab(BERT_VOCAB)
    kept = built[: len(built) - NUM_WORDS]

    def unreachable(token):  # a CJK character or punctuation is always a word of its own, never a "##" piece
        rest = token[2:] if token.startswith("##") else ""
        return any(is_cjk(c) or unicodedata.category(c)[0] == "P" or c in "$+<=>^`|~" for c in rest)

    assert kept == [token for token in base if not unreachable(token)]
    assert [built.index(token) for token in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [0, 100, 101, 102, 103]
    assert "##中" not in built and "##ing" in built and "中" in built  # "##中" can never be produced
    assert len(set(built)) == len(built)


def test_adds_the_most_frequent_new_jieba_words(built, corpus):
    _, lines = corpus
    base = set(built[: len(built) - NUM_WORDS])
    expected = [word for word, _ in reference_word_counts(lines).most_common() if word not in base and word.strip()]
    assert built[-NUM_WORDS:] == expected[:NUM_WORDS]
    # BERT-Chinese lacks curly quotes and the dash; the sample's 1,200 paragraphs have fewer dashes
    top_words = {3000: ["“", "”", "—", "中国"], 1200: ["“", "”", "中国", "我们"]}[len(lines)]
    assert built[-NUM_WORDS:][:4] == top_words


def test_agrees_with_the_vocab_of_the_original_checkpoints(built, roformer_vocab):
    original = set(read_vocab(roformer_vocab))
    top_words = built[-NUM_WORDS:][:200]
    assert sum(word in original for word in top_words) >= 0.95 * len(top_words)


def test_built_vocab_makes_fewer_tokens(built, corpus):
    folder, lines = corpus
    word_level = RoFormerJiebaTokenizer(str(folder / "out" / "vocab.txt"))
    character_level = RoFormerJiebaTokenizer(str(BERT_VOCAB))
    count = [sum(map(len, tokenizer(lines[:500])["input_ids"])) for tokenizer in (word_level, character_level)]
    assert count[0] < 0.9 * count[1]


def test_missing_corpus_is_a_readable_error(tmp_path, capsys):
    base_vocab = str(BERT_VOCAB)
    arguments = ["--base_vocab", base_vocab, "--num_words", "5", "--output", str(tmp_path / "v.txt")]
    with pytest.raises(SystemExit) as exit_info:
        main(["--corpus", str(tmp_path / "missing.txt"), *arguments])
    assert exit_info.value.code == 2 and "missing.txt does not exist" in capsys.readouterr().err


def test_bad_base_vocab_and_bad_json_lines_are_readable_errors(tmp_path):
    (tmp_path / "corpus.jsonl").write_text('{"body": "没有 text 字段"}\n', encoding="utf-8")
    (tmp_path / "tiny_vocab.txt").write_text("[PAD]\n[UNK]\n", encoding="utf-8")
    base_vocab = str(BERT_VOCAB)
    for corpus_file, vocab in [("corpus.jsonl", base_vocab), ("corpus.jsonl", str(tmp_path / "tiny_vocab.txt"))]:
        arguments = ["--corpus", str(tmp_path / corpus_file), "--base_vocab", vocab, "--num_words", "5"]
        with pytest.raises(SystemExit, match=r"^build_vocab: error: .*(field 'text'|lacks the special token)"):
            main([*arguments, "--output", str(tmp_path / "v.txt")])


def test_command_line_shows_progress(corpus, tmp_path):
    folder, _ = corpus
    command = [sys.executable, "-m", "roformer_hf.build_vocab", "--corpus", str(folder / "news.txt")]
    command += ["--base_vocab", str(BERT_VOCAB), "--num_words", "10"]
    completed = subprocess.run([*command, "--output", str(tmp_path / "v.txt")], capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr[-1000:]
    assert "counting: 100%" in completed.stderr and "10 corpus words" in completed.stdout

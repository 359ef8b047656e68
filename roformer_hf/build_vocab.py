"""Build a word-level vocabulary the WoBERT way: a BERT-Chinese vocab plus the most frequent jieba words of a corpus.

```bash
python -m roformer_hf.build_vocab --corpus corpus.txt more.jsonl --base_vocab bert_vocab.txt --num_words 30000 \
    --output vocab.txt
```

The recipe (WoBERT, then the Chinese RoFormer checkpoints):

1. keep the base vocabulary in its order: special tokens, `[unused*]`, characters and `##` pieces, except the `##`
   pieces the rule can never produce (a CJK character or a punctuation mark is always a word of its own, so e.g.
   `##中` is unreachable);
2. segment the corpus exactly as `RoFormerJiebaTokenizer` does (lowercase/NFD, jieba with HMM off) and count words;
3. append the `num_words` most frequent words missing from the base vocabulary (words holding whitespace or control
   characters excepted: a vocab line cannot hold them), most frequent first.

Corpus files are plain text (one document a line) or JSON lines with a `"text"` field (`*.jsonl`).
"""

import argparse
import json
import os
import sys
from collections import Counter
from collections.abc import Iterator

from tqdm.auto import tqdm

from .tokenization import RoFormerJiebaTokenizer, is_cjk_character, is_dropped, is_punctuation, is_whitespace


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m roformer_hf.build_vocab", description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", nargs="+", required=True, help="Text files (a document a line) or *.jsonl.")
    parser.add_argument("--base_vocab", required=True, help="The BERT-Chinese vocab.txt to start from.")
    parser.add_argument("--num_words", type=int, required=True, help="How many corpus words to add.")
    parser.add_argument("--output", required=True, help="Where to write the new vocab.txt.")
    parser.add_argument("--user_dict", help="A jieba user dictionary to segment with (as the tokenizer will).")
    parser.add_argument(
        "--no_lower_case", dest="do_lower_case", action="store_false", help="Keep case and accents (cased models)."
    )
    args = parser.parse_args(argv)
    for path in [*args.corpus, args.base_vocab, *([args.user_dict] if args.user_dict else [])]:
        if not os.path.isfile(path):
            parser.error(f"{path} does not exist: pass existing files to --corpus, --base_vocab and --user_dict.")
    if args.num_words < 0:
        parser.error(f"--num_words must be 0 or more, got {args.num_words}.")
    return args


def read_documents(paths: list[str]) -> Iterator[str]:
    """Every document of the corpus files, with a progress bar over their bytes."""
    with tqdm(total=sum(os.path.getsize(path) for path in paths), unit="B", unit_scale=True, desc="counting") as bar:
        for path in paths:
            with open(path, encoding="utf-8") as reader:
                for line in reader:
                    bar.update(len(line.encode("utf-8")))
                    text = document_text(path, line)
                    if text:
                        yield text


def document_text(path: str, line: str) -> str:
    if not path.endswith(".jsonl") or not line.strip():
        return line.strip()
    record = json.loads(line)
    if not isinstance(record, dict) or not isinstance(record.get("text"), str):
        raise ValueError(f"{path} holds a JSON line without a string field 'text': give each line one.")
    return record["text"]


def count_words(tokenizer: RoFormerJiebaTokenizer, documents: Iterator[str]) -> Counter:
    """Frequencies of the jieba words, segmented exactly as the tokenizer segments text."""
    counts = Counter()
    for text in documents:
        normalized = tokenizer.normalize(text)
        counts.update(tokenizer.segment(normalized))
    return counts


def is_reachable(token: str) -> bool:
    """Whether the rule can ever produce this base-vocab token (`##` + a CJK character or punctuation cannot)."""
    if not token.startswith("##") or len(token) == 2:
        return True
    return not any(is_cjk_character(character) or is_punctuation(character) for character in token[2:])


def can_be_a_vocab_line(word: str) -> bool:
    return not any(is_whitespace(character) or is_dropped(character) or character.isspace() for character in word)


def build_vocab(base_tokens: list[str], counts: Counter, num_words: int) -> list[str]:
    """The base tokens the rule can reach, then the `num_words` most frequent new words."""
    tokens = [token for token in base_tokens if is_reachable(token)]
    known = set(tokens)
    new_words = (word for word, _ in counts.most_common() if word not in known and can_be_a_vocab_line(word))
    return tokens + [word for _, word in zip(range(num_words), new_words, strict=False)]


def write_vocab(args: argparse.Namespace) -> str:
    """Build the vocabulary the arguments describe, write it, and return a one-line summary."""
    tokenizer = RoFormerJiebaTokenizer(
        args.base_vocab, do_lower_case=args.do_lower_case, user_dict_file=args.user_dict
    )
    base_tokens = [token for token, _ in sorted(tokenizer.vocab.items(), key=lambda item: item[1])]
    counts = count_words(tokenizer, read_documents(args.corpus))
    tokens = build_vocab(base_tokens, counts, args.num_words)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as writer:
        writer.writelines(f"{token}\n" for token in tokens)
    added = len(tokens) - sum(map(is_reachable, base_tokens))
    return f"wrote {args.output}: {len(tokens)} tokens ({added} corpus words, segmented with {tokenizer.segmenter})"


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        print(write_vocab(args))
    except (OSError, ValueError) as error:  # a bad base vocab or corpus file: one readable line, no traceback
        sys.exit(f"build_vocab: error: {error}")


if __name__ == "__main__":
    main()

"""A deterministic synthetic parallel corpus in IWSLT15 en-vi's file layout.

Standard library only: Sockeye's launcher runs it in the engine's interpreter on
every worker, and the synthetic IWSLT15 package (reprokit.data.iwslt) at install time.

    python -m reprokit.wire.synthetic_corpus OUT_DIR [--train-pairs N] [--seed S]

Writes train.{en,vi}, tst2012.{en,vi}, tst2013.{en,vi} and vocab.{en,vi} (one
token per line, <unk> <s> </s> first, as IWSLT15's). Sentence lengths follow
IWSLT15's training side (mostly 5-40 tokens) and words are Zipf-distributed;
the target is a fixed word mapping of the source with local reordering, so
there is something to learn. It is NOT natural language: it exists so that a
translation model can be trained and timed without the real corpus.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
from collections.abc import Sequence

FILES = ("train.en", "train.vi", "tst2012.en", "tst2012.vi", "tst2013.en", "tst2013.vi", "vocab.en", "vocab.vi")
SPECIAL_TOKENS = ("<unk>", "<s>", "</s>")
DEFAULT_TRAIN_PAIRS = 2000
TEST_PAIRS = 100
SOURCE_VOCAB = 2000
TARGET_VOCAB = 1500


def _words(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{number}" for number in range(count)]


def _sentence(rng: random.Random, vocab: list[str], weights: list[float]) -> list[str]:
    length = min(40, max(3, int(rng.gauss(16, 7))))
    return rng.choices(vocab, weights=weights, k=length)


def _translate(source: list[str], mapping: dict[str, str]) -> list[str]:
    target = [mapping[word] for word in source]
    for start in range(0, len(target) - 1, 3):  # swap neighbours: a little reordering to learn
        target[start], target[start + 1] = target[start + 1], target[start]
    return target


def write_corpus(out_dir: str, train_pairs: int = DEFAULT_TRAIN_PAIRS, seed: int = 1) -> list[str]:
    """Write the corpus into ``out_dir`` (created); files appear whole (written aside, then renamed)."""
    rng = random.Random(seed)
    source_vocab, target_vocab = _words("en", SOURCE_VOCAB), _words("vi", TARGET_VOCAB)
    weights = [1.0 / (rank + 1) for rank in range(SOURCE_VOCAB)]
    mapping = {word: target_vocab[rng.randrange(TARGET_VOCAB)] for word in source_vocab}
    os.makedirs(out_dir, exist_ok=True)
    texts = {}
    for split, pairs in (("train", train_pairs), ("tst2012", TEST_PAIRS), ("tst2013", TEST_PAIRS)):
        sources = [_sentence(rng, source_vocab, weights) for _ in range(pairs)]
        texts[f"{split}.en"] = "".join(" ".join(s) + "\n" for s in sources)
        texts[f"{split}.vi"] = "".join(" ".join(_translate(s, mapping)) + "\n" for s in sources)
    texts["vocab.en"] = "".join(f"{w}\n" for w in (*SPECIAL_TOKENS, *source_vocab))
    texts["vocab.vi"] = "".join(f"{w}\n" for w in (*SPECIAL_TOKENS, *target_vocab))
    for name in FILES:
        path = os.path.join(out_dir, name)
        with open(path + ".part", "w", encoding="utf-8") as handle:
            handle.write(texts[name])
        os.replace(path + ".part", path)
    return [os.path.join(out_dir, name) for name in FILES]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--train-pairs", type=int, default=DEFAULT_TRAIN_PAIRS)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.train_pairs < 1:
        parser.error(f"--train-pairs must be at least 1, got {args.train_pairs}")
    write_corpus(args.out_dir, args.train_pairs, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())

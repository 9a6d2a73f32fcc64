"""IWSLT15 English-Vietnamese for the Sockeye workload: download, synthesis, and which corpus a run reads.

The corpus is a folder with the files Stanford's NMT page publishes (FILES).
Two kinds are told apart, because results must say which one a run read:

- ``iwslt15``: the real corpus, downloaded file by file from BASE_URL;
- ``iwslt15-synthetic``: reprokit.wire.synthetic_corpus's deterministic corpus in
  the same layout, a few hundred KB; never IWSLT15.

A run without a registered corpus generates the synthetic one per worker
(data ``synthetic``). Runs in the framework's interpreter:

    python -m reprokit.data.iwslt fetch --url BASE_URL --dest DIR
    python -m reprokit.data.iwslt synthetic --dest DIR [--train-pairs N]
"""
from __future__ import annotations

import argparse
import shutil
import signal
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from reprokit.core.errors import UserError, one_line_errors
from reprokit.core.values import whole_number
from reprokit.data.fetch import download, fresh_staging, swap_in
from reprokit.data.imagenet import read_marker, write_marker
from reprokit.data.registered import EnvEntry, best_or_explain, data_mode, pinned_entries
from reprokit.wire import synthetic_corpus

BASE_URL = "https://nlp.stanford.edu/projects/nmt/data/iwslt15.en-vi/"
FILES = ("train.en", "train.vi", "tst2012.en", "tst2012.vi", "tst2013.en", "tst2013.vi", "vocab.en", "vocab.vi")
PAIRS = (("train.en", "train.vi"), ("tst2012.en", "tst2012.vi"), ("tst2013.en", "tst2013.vi"))
KIND_REAL, KIND_SYNTHETIC = "iwslt15", "iwslt15-synthetic"
RANK = {KIND_SYNTHETIC: 0, KIND_REAL: 1}  # the more real, the better
CORPUS_DIR = "corpus"  # an installed package's corpus folder, under its install folder
TAGS = "dataset,iwslt15,en-vi"
ENV = "CK_ENV_DATASET_IWSLT15_EN_VI"  # the soft entry's env prefix
INSTALL_HINT = ("install it with: ck install package:dataset-iwslt15-en-vi --quiet (the real corpus) or "
                "ck install package:dataset-iwslt15-en-vi-synthetic --quiet")


@dataclass(frozen=True)
class Corpus:
    """A parallel corpus a Sockeye run reads."""
    name: str  # the result's data field: iwslt15 or iwslt15-synthetic
    folder: str
    train_pairs: int
    env_uid: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def train_args(self) -> list[str]:
        return ["--data-dir", self.folder]


def _lines(path: Path) -> int:
    with open(path, "rb") as handle:
        return sum(1 for _ in handle)


def check_corpus(folder: Path) -> int:
    """The number of training pairs; a UserError naming what is missing or mismatched."""
    missing = [name for name in FILES if not (folder / name).is_file() or (folder / name).stat().st_size == 0]
    if missing:
        raise UserError(f"{folder} is not an IWSLT15 en-vi corpus: {', '.join(missing)} missing or empty")
    counts = {}
    for source, target in PAIRS:
        counts[source], counts[target] = _lines(folder / source), _lines(folder / target)
        if counts[source] != counts[target]:
            raise UserError(f"{folder}: {source} has {counts[source]} lines but {target} has {counts[target]}; "
                            f"the corpus is damaged")
    return counts["train.en"]


def fetch(base_url: str, dest: Path, progress: Callable[[str], None] | None = None) -> Corpus:
    """Download every file into ``dest/corpus``, check the pairs line up; nothing changes there on failure."""
    base = base_url if base_url.endswith("/") else base_url + "/"
    staging = fresh_staging(dest)
    try:
        for name in FILES:
            if progress:
                progress(f"downloading {base}{name}")
            download(base + name, staging / name)
        pairs = check_corpus(staging)
        write_marker(staging, KIND_REAL, url=base)
        swap_in(staging, dest / CORPUS_DIR)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Corpus(KIND_REAL, str(dest / CORPUS_DIR), pairs)


def make_synthetic(dest: Path, train_pairs: int | None = None, seed: int = 1) -> Corpus:
    """The synthetic corpus (the generator every Sockeye worker uses without data) in ``dest/corpus``."""
    staging = fresh_staging(dest)
    try:
        synthetic_corpus.write_corpus(str(staging), train_pairs or synthetic_corpus.DEFAULT_TRAIN_PAIRS, seed)
        write_marker(staging, KIND_SYNTHETIC, seed=seed)
        pairs = check_corpus(staging)
        swap_in(staging, dest / CORPUS_DIR)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Corpus(KIND_SYNTHETIC, str(dest / CORPUS_DIR), pairs)


def describe(folder: str | Path) -> Corpus:
    """What a corpus folder is: its kind from the marker (none: the real corpus, detected) and its size."""
    path = Path(folder)
    pairs = check_corpus(path)
    kind = read_marker(path).get("kind", KIND_REAL)
    if kind not in RANK:
        raise UserError(f"{path} is marked as {kind!r}, not an IWSLT15 corpus")
    return Corpus(kind, str(path), pairs)


def choose_corpus(entries: list[EnvEntry], mode: str = "", pinned: str = "") -> Corpus | None:
    """The corpus a Sockeye run reads, or None to generate the synthetic one per worker.

    ``mode`` (--env.DATA): synthetic (default) reads none; iwslt15 requires one (the
    real corpus before the synthetic one); a pin (--env.DATASET_ENV) implies iwslt15.
    """
    mode = data_mode(mode, pinned, "iwslt15", "sockeye")
    if mode == "synthetic":
        return None
    usable = []
    for entry in pinned_entries(entries, pinned, "DATASET_ENV", TAGS):
        try:
            corpus = describe(entry.variables.get(ENV, ""))
        except UserError:
            continue  # its folder was removed or damaged
        usable.append((RANK[corpus.name], Corpus(corpus.name, corpus.folder, corpus.train_pairs, entry.uid)))
    return best_or_explain(
        usable, pinned, gone=f"the corpus of env {pinned} is gone or damaged; {INSTALL_HINT}",
        missing=f"DATA=iwslt15 needs a registered IWSLT15 en-vi corpus (CK env with tags {TAGS}); {INSTALL_HINT}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reprokit.data.iwslt", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fetch", help="download the corpus file by file and check it")
    f.add_argument("--url", default=BASE_URL, help="the folder URL that holds the files")
    f.add_argument("--dest", required=True, type=Path)
    s = sub.add_parser("synthetic", help="generate the deterministic synthetic corpus")
    s.add_argument("--dest", required=True, type=Path)
    s.add_argument("--train-pairs", default="0")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # clean up the staging folder on SIGTERM too

    def say(message: str) -> None:
        print(f"iwslt15: {message}", flush=True)

    with one_line_errors("iwslt15", "nothing was installed"):
        if args.command == "fetch":
            corpus = fetch(args.url, args.dest, progress=say)
        else:
            pairs = whole_number(args.train_pairs, "--train-pairs", "--train-pairs=N (0: the default size)")
            corpus = make_synthetic(args.dest, pairs or None)
    say(f"{corpus.name} corpus with {corpus.train_pairs} training pairs at {corpus.folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""IWSLT15 en-vi corpora: checks, the synthetic corpus, and which corpus a Sockeye run reads."""
import hashlib
from pathlib import Path

import pytest

from reprokit.core.errors import UserError
from reprokit.data.iwslt import (
    ENV,
    FILES,
    KIND_REAL,
    KIND_SYNTHETIC,
    check_corpus,
    choose_corpus,
    describe,
    make_synthetic,
)
from reprokit.data.registered import EnvEntry


def digest(folder: Path) -> dict[str, str]:
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in FILES}


def test_synthetic_corpus_is_deterministic_aligned_and_marked(tmp_path):
    first = make_synthetic(tmp_path / "a", train_pairs=300)
    second = make_synthetic(tmp_path / "b", train_pairs=300)
    assert digest(Path(first.folder)) == digest(Path(second.folder))
    assert (first.name, first.train_pairs) == (KIND_SYNTHETIC, 300)
    assert describe(first.folder).name == KIND_SYNTHETIC  # nobody mistakes it for IWSLT15
    vocab = (Path(first.folder) / "vocab.en").read_text().split("\n")
    assert vocab[:3] == ["<unk>", "<s>", "</s>"]  # IWSLT15's vocabulary layout
    for en, vi in zip((Path(first.folder) / "train.en").read_text().splitlines(),
                      (Path(first.folder) / "train.vi").read_text().splitlines()):
        assert len(en.split()) == len(vi.split()) >= 3


@pytest.mark.parametrize("damage,message", [
    (lambda f: (f / "tst2013.vi").unlink(), "tst2013.vi missing or empty"),
    (lambda f: (f / "train.vi").write_text((f / "train.vi").read_text() + "extra line\n"),
     "train.en has 50 lines but train.vi has 51; the corpus is damaged"),
])
def test_a_damaged_corpus_is_refused_naming_the_file(tmp_path, damage, message):
    folder = Path(make_synthetic(tmp_path, train_pairs=50).folder)
    damage(folder)
    with pytest.raises(UserError, match=message):
        check_corpus(folder)


def entry(tmp_path: Path, uid: str, kind: str) -> EnvEntry:
    corpus = make_synthetic(tmp_path / uid, train_pairs=20)
    if kind == KIND_REAL:
        (Path(corpus.folder) / "reprokit-dataset.json").unlink()  # a detected folder without marker: the real one
    return EnvEntry(uid=uid, alias=uid, variables={ENV: corpus.folder})


def test_the_real_corpus_is_preferred_and_data_synthetic_reads_none(tmp_path):
    entries = [entry(tmp_path, "s1", KIND_SYNTHETIC), entry(tmp_path, "r1", KIND_REAL)]
    assert choose_corpus(entries) is None  # the default reads none of them
    assert choose_corpus(entries, mode="iwslt15").env_uid == "r1"
    assert choose_corpus(entries, pinned="s1").name == KIND_SYNTHETIC
    assert choose_corpus(entries, mode="synthetic") is None
    assert choose_corpus([]) is None  # generated per worker


@pytest.mark.parametrize("mode,pinned,message", [
    ("recordio", "", "unknown DATA 'recordio' for sockeye; valid ones: synthetic, iwslt15"),
    ("iwslt15", "", "DATA=iwslt15 needs a registered IWSLT15 en-vi corpus"),
    ("", "nope", "DATASET_ENV=nope is not a registered env entry with tags dataset,iwslt15,en-vi"),
    ("synthetic", "x", "DATA=synthetic reads no dataset, but DATASET_ENV=x pins one"),
])
def test_bad_data_choices_are_refused_in_one_line(mode, pinned, message):
    with pytest.raises(UserError) as err:
        choose_corpus([], mode=mode, pinned=pinned)
    assert message in str(err.value) and "\n" not in str(err.value)

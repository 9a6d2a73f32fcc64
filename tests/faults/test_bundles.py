"""Hostile study bundles through the real `ck import study` / `ck report study` (fault class: bundle).

Every bundle here is made by support.bundles.Forgery: the members, their types, names and declared sizes, the
manifest and the key that signs it are the test's. Most are signed correctly by their own (new) evaluator,
so what is refused is their content, not a broken signature. Each refusal must be one line naming the cause,
exit non-zero, leave the store byte for byte as it was, and write nothing outside it.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import signal
import socket
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from reprokit.study.store.bundle import MAX_MANIFEST_BYTES, MAX_RECORD_BYTES
from reprokit.study.store.records import Store
from support.bundles import Member, filled_store, forgery_of
from support.ckcli import CkCli, own_ck
from support.faults import expect, finishes, no_traceback, one_clear_line
from support.runs import wait_for

pytestmark = [pytest.mark.fault("bundle"), pytest.mark.parallel]  # ck commands only: no testbed, no training, no timing
STUDY = "study:sysml19-p3"
# Peak memory of `ck import` beyond what it needs for a small bundle: the bombs here decompress to hundreds of MB.
MEMORY_HEADROOM_KB = 100 * 1024


def snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() or p.is_symlink()}


@pytest.fixture(scope="module")
def cli(tmp_path_factory) -> CkCli:
    return own_ck(tmp_path_factory.mktemp("ck"))


@pytest.fixture(scope="module")
def evaluator_a(tmp_path_factory, cli):
    """Evaluator A's store and its bundle, written by `ck export`."""
    root = tmp_path_factory.mktemp("a")
    store = filled_store(root / "store", "host-a")
    bundle = root / "a.tar.gz"
    proc = cli("export", STUDY, f"--store={store.root}", f"--out={bundle}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return store, bundle


@pytest.fixture
def workspace(tmp_path):
    """The importing evaluator's store (6 runs of its own) inside ``tmp_path/inside``; everything else under
    tmp_path must stay untouched, whatever a bundle names."""
    store = filled_store(tmp_path / "inside" / "store", "host-b")
    (tmp_path / "bundles").mkdir()
    return store


def run_ck(cli: CkCli, *args: str, timeout: float = 180) -> tuple[int, str]:
    proc = cli.popen(*args)
    code = finishes(proc, timeout)
    return code, proc.stdout.read()


def outside_files(tmp_path: Path) -> set[str]:
    return {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")
            if "inside" not in p.relative_to(tmp_path).parts[:1] and "bundles" not in p.relative_to(tmp_path).parts[:1]}


def refused(cli: CkCli, bundle: Path, store: Store, *names: str, study: str = "study") -> str:
    """`ck import` refuses ``bundle`` in one line naming ``names``, and the store is exactly as it was."""
    tmp_path = store.root.parents[1]
    before, outside = snapshot(store.root), outside_files(tmp_path)
    code, out = run_ck(cli, "import", study, f"--in={bundle}", f"--store={store.root}")
    line = one_clear_line(out, "refusing bundle", "nothing was imported", *names)
    expect(code != 0, "unclear", f"the refusal exited 0:\n{out}")
    expect(snapshot(store.root) == before, "data-lost", f"a refused import changed the store:\n{out}")
    expect(outside_files(tmp_path) == outside, "injection", "a refused import wrote outside the store")
    return line


def imported(cli: CkCli, bundle: Path, store: Store) -> str:
    code, out = run_ck(cli, "import", "study", f"--in={bundle}", f"--store={store.root}")
    no_traceback(out)
    assert code == 0, out
    return out


def report_json(cli: CkCli, store: Store) -> dict:
    code, out = run_ck(cli, "report", STUDY, f"--store={store.root}")
    no_traceback(out)
    assert code == 0, out
    return json.loads((store.root / "report" / "report.json").read_text())


def runs_per_setup(data: dict) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in data["configurations"]:
        counts[row["setup"]] = counts.get(row["setup"], 0) + row["n"] + row["failed"]
    return counts


def set_at(data: dict, path: tuple, value) -> None:
    for key in path[:-1]:
        data = data[key]
    data[path[-1]] = value


# --- hostile records, correctly signed by their own evaluator ---------------------------------------

IDENTIFIERS = [  # every string field a path could be built from: each must be a plain name
    ("record_id",), ("study",), ("sweep_id",), ("origin", "id"), ("origin", "host"), ("origin", "study"),
    ("config", "model"), ("config", "variant"), ("config", "bandwidth"), ("config", "profile"),
    ("config", "target", "name"), ("config", "target", "kind"), ("config", "target", "hosts", 0),
    ("config", "target", "testbed"), ("config", "target", "link_capacity"), ("run_folder",),
]


def dotted(path: tuple) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else p) for i, p in enumerate(path))


@pytest.mark.parametrize("path", IDENTIFIERS, ids=dotted)
def test_path_traversal_in_any_identifier_is_refused(cli, workspace, tmp_path, path):
    forgery = forgery_of(workspace)
    record = forgery.record()
    set_at(record, path, f"../../../../../../..{tmp_path}/escaped")
    forgery.set_record(record)
    refused(cli, forgery.write(tmp_path / "bundles" / "b.tar.gz"), workspace, dotted(path))


MISTYPED = [  # (change to one record, the words the refusal must name)
    (lambda r: r.pop("config"), ("has no 'config'",)),
    (lambda r: r["result"].update(throughput_samples_per_sec="12.5"), ("result.throughput_samples_per_sec", "finite")),
    (lambda r: r["result"].update(throughput_samples_per_sec=float("nan")), ("result.throughput_samples_per_sec",)),
    (lambda r: r["result"].update(throughput_samples_per_sec=-3.0), ("result.throughput_samples_per_sec", "from 0")),
    (lambda r: r["result"].update(params_in_sync="yes"), ("result.params_in_sync", "true or false")),
    (lambda r: r["config"].update(repetition="1"), ("config.repetition", "whole number")),
    (lambda r: r["config"].update(repetition=0), ("config.repetition", "from 1")),
    (lambda r: r.update(status="maybe"), ("status", "ok, failed")),
    (lambda r: r["config"]["target"].update(hosts=[]), ("config.target.hosts", "1 to 1024")),
    (lambda r: r.update(provenance=["a"]), ("provenance", "must be an object")),
    (lambda r: r.update(failure_reason="\x1b[2J\x1b[31mfine"), ("failure_reason", "control character")),
    (lambda r: r["provenance"].update(deep=[[[[[[[["x"]]]]]]]]), ("provenance.deep", "nested deeper")),
    (lambda r: r.update(local=True), ("unknown key(s) 'local'",)),  # a record cannot declare itself local
    (lambda r: r.update(result="fast"), ("result", "must be an object")),
]


@pytest.mark.parametrize("change, names", MISTYPED, ids=[" ".join(n) for _, n in MISTYPED])
def test_missing_and_mistyped_fields_are_refused_naming_the_field(cli, workspace, tmp_path, change, names):
    forgery = forgery_of(workspace)
    record = forgery.record()
    change(record)
    forgery.set_record(record)
    refused(cli, forgery.write(tmp_path / "bundles" / "b.tar.gz"), workspace, *names)


def test_free_text_with_paths_and_script_tags_is_imported_shown_escaped_and_names_no_file(cli, workspace, tmp_path):
    hostile = (f"../../../../../../..{tmp_path}/escaped <script>alert('x')</script> <img src=x onerror=alert(1)> "
               f"![t](http://example.invalid/t.png) `code")
    forgery = forgery_of(workspace)
    names = [m.name[len("records/"):-len(".json")] for m in forgery.members if m.name.startswith("records/")]
    for i, record_id in enumerate(names):
        record = forgery.record(record_id)
        record["provenance"].update(repo_revision=hostile, controller_host=hostile, engine=hostile, ck_version=hostile)
        record["config"]["target"]["label"] = hostile
        record["result"]["model"] = hostile
        if i == 0:  # a failed run: its reason is in the report's table
            record.update(status="failed", failure_reason=hostile, result=None)
        forgery.set_record(record, record_id)
    bundle = forgery.write(tmp_path / "bundles" / "b.tar.gz")
    outside = outside_files(tmp_path)
    imported(cli, bundle, workspace)
    report_json(cli, workspace)
    expect(outside_files(tmp_path) == outside, "injection", "import or report wrote outside the store")
    html = (workspace.root / "report" / "report.html").read_text()
    md = (workspace.root / "report" / "report.md").read_text()
    expect("<script>alert" not in html and "<img src=x" not in html, "injection", "record text reached the HTML raw")
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in html  # shown, escaped
    expect("<script>" not in md and "<img" not in md and "](http" not in md and " `code" not in md, "injection",
           "record text reached the Markdown raw")
    # Plots are named by the model and the report's own fixed names, never by record text.
    assert sorted(p.name for p in (workspace.root / "report" / "plots").iterdir()) == [
        "resnet.png", "resnet.svg", "sensitivity.png", "sensitivity.svg"]


# --- forged origins ------------------------------------------------------------------------------

def test_a_record_edited_and_its_manifest_rehashed_is_refused(cli, workspace, evaluator_a, tmp_path):
    store_a, _ = evaluator_a
    forgery = forgery_of(store_a, key=store_a.signing_key())  # A's own bundle, as export makes it
    origin_a = store_a.origin().to_dict()
    forgery.claim_origin(origin_a)
    signed = forgery.build_manifest()["signature"]
    record = forgery.record()
    record["result"]["throughput_samples_per_sec"] *= 10
    forgery.set_record(record)
    forgery.manifest["signature"] = signed  # re-hashed, not re-signable without A's key
    refused(cli, forgery.write(tmp_path / "bundles" / "rehashed.tar.gz"), workspace, "signature does not match")
    forgery.manifest.pop("signature")
    forgery.key = Ed25519PrivateKey.generate()  # signed again, by someone else, still claiming to be A
    refused(cli, forgery.write(tmp_path / "bundles" / "resigned.tar.gz"), workspace,
            "is not the fingerprint of the key that signed it", "forged")


def test_a_bundle_claiming_to_be_this_store_is_refused_and_the_local_setup_holds_only_local_runs(
        cli, workspace, evaluator_a, tmp_path):
    forgery = forgery_of(workspace)
    forgery.claim_origin(workspace.origin().to_dict())
    refused(cli, forgery.write(tmp_path / "bundles" / "local.tar.gz"), workspace, "claims this store's origin",
            "forged")
    forgery.manifest["public_key"] = workspace.public_key()  # this store's public key, signed by another
    refused(cli, forgery.write(tmp_path / "bundles" / "local-key.tar.gz"), workspace, "signature does not match")
    imported(cli, evaluator_a[1], workspace)
    counts = runs_per_setup(report_json(cli, workspace))
    assert counts["tb [here]"] == 6 and sum(counts.values()) == 12
    assert not list(workspace.imported_dir.rglob("origin.key"))  # the key never travels
    with tarfile.open(evaluator_a[1]) as tar:
        assert all(n == "manifest.json" or n.startswith(("records/", "runs/")) for n in tar.getnames())


# The report labels this store's runs "here" and another store's "host (first 8 of its id)": an id such as
# "local" from this host's name would read as this machine's own runs.
@pytest.mark.parametrize("origin_id", ["local", "here", "LOCAL-0123456789abcdef0123456789abcdef"])
def test_an_origin_id_no_store_makes_is_refused_naming_the_field(cli, workspace, tmp_path, origin_id):
    forgery = forgery_of(workspace)
    forgery.claim_origin({"id": origin_id, "host": socket.gethostname(), "study": "sysml19-p3"})
    refused(cli, forgery.write(tmp_path / "bundles" / "b.tar.gz"), workspace, f"origin.id {origin_id!r}",
            "is not one a store makes", "ck export wrote")


def test_a_store_made_before_keys_is_pinned_to_the_first_key_an_importer_sees(cli, workspace, tmp_path):
    legacy = Store(tmp_path / "legacy", "sysml19-p3")
    legacy_id = "0123456789abcdef0123456789abcdef"  # uuid4().hex, as stores were named before keys
    (legacy.root).mkdir()
    (legacy.root / "origin.json").write_text(json.dumps({"id": legacy_id, "host": "old", "study": "sysml19-p3"}))
    filled_store(legacy.root, "old")
    bundle = tmp_path / "bundles" / "legacy.tar.gz"
    code, out = run_ck(cli, "export", STUDY, f"--store={legacy.root}", f"--out={bundle}")
    assert code == 0, out
    assert "imported 6 run(s)" in imported(cli, bundle, workspace)
    forgery = forgery_of(legacy, key=Ed25519PrivateKey.generate())  # someone else, claiming the old id
    origin = legacy.origin().to_dict()
    forgery.origin = origin
    for m in forgery.members:
        if m.name.startswith("records/"):
            data = json.loads(m.data)
            data["origin"] = origin
            data["record_id"] = data["record_id"].replace("s--", "x--", 1)
            data["sweep_id"] = "x"
            data["run_folder"] = data["run_folder"].replace("runs/s--", "runs/x--", 1)
            m.data = json.dumps(data).encode()
            m.name = m.name.replace("records/s--", "records/x--", 1)
        else:
            m.name = m.name.replace("runs/s--", "runs/x--", 1)
    refused(cli, forgery.write(tmp_path / "bundles" / "legacy-forged.tar.gz"), workspace,
            f"its origin {legacy_id} was imported before signed by another key")


def test_a_bundle_imported_before_records_were_checked_is_left_out_of_the_report_with_the_fix(
        cli, workspace, evaluator_a, tmp_path):
    old = workspace.imported_dir / "0123456789ab-0123456789ab"
    record = json.loads(next(workspace.records_dir.glob("*.json")).read_text())
    record.pop("config")  # what an earlier import let through
    (old / "records").mkdir(parents=True)
    (old / "records" / f"{record['record_id']}.json").write_text(json.dumps(record))
    code, out = run_ck(cli, "report", STUDY, f"--store={workspace.root}")
    no_traceback(out)
    assert code == 0, out
    one_clear_line(out, "warning", "has no 'config'", "its bundle is left out", f"remove {old}")
    assert "imported 6 run(s)" in imported(cli, evaluator_a[1], workspace)  # later imports still work
    assert (old / "records").is_dir()  # nothing removed for the user


def test_an_unsigned_bundle_of_the_earlier_format_is_refused_naming_the_fix(cli, workspace, tmp_path):
    forgery = forgery_of(workspace, key=None)
    forgery.manifest.update(format="reprokit-study-bundle/1")
    forgery.manifest.pop("signature", None)
    refused(cli, forgery.write(tmp_path / "bundles" / "old.tar.gz"), workspace, "without a signature",
            "export it again")


# --- the same runs twice -----------------------------------------------------------------------------

def test_two_exports_of_one_store_count_every_run_once(cli, workspace, evaluator_a, tmp_path):
    store_a, first = evaluator_a
    second = tmp_path / "bundles" / "a-again.tar.gz"
    code, out = run_ck(cli, "export", STUDY, f"--store={store_a.root}", f"--out={second}")
    assert code == 0, out
    assert first.read_bytes() != second.read_bytes()  # another export: another nonce and time
    assert "imported 6 run(s)" in imported(cli, first, workspace)
    before = snapshot(workspace.root)
    assert "every run of this bundle was imported before" in imported(cli, second, workspace)
    assert snapshot(workspace.root) == before
    assert runs_per_setup(report_json(cli, workspace)) == {"tb [here]": 6, next(
        s for s in runs_per_setup(report_json(cli, workspace)) if s != "tb [here]"): 6}

    grown = filled_store(tmp_path / "a-grown", "host-a")  # A's store after a second sweep, exported again
    for name in ("origin.json", "origin.key"):
        (grown.root / name).write_bytes((store_a.root / name).read_bytes())
    for path in store_a.records_dir.glob("*.json"):
        (grown.records_dir / path.name).unlink(missing_ok=True)
    filled_store(grown.root, "host-a", sweep="t")
    for path in store_a.records_dir.glob("*.json"):
        (grown.records_dir / path.name).write_bytes(path.read_bytes())
    third = tmp_path / "bundles" / "a-grown.tar.gz"
    code, out = run_ck(cli, "export", STUDY, f"--store={grown.root}", f"--out={third}")
    assert code == 0, out
    assert "imported 6 run(s) (6 imported before, left out)" in imported(cli, third, workspace)
    counts = runs_per_setup(report_json(cli, workspace))
    assert sorted(counts.values()) == [6, 12] and sum(counts.values()) == 18


def test_the_same_run_with_other_content_is_refused(cli, workspace, evaluator_a, tmp_path):
    store_a, bundle = evaluator_a
    imported(cli, bundle, workspace)
    forgery = forgery_of(store_a, key=store_a.signing_key())  # A itself, after editing a stored record
    origin_a = store_a.origin().to_dict()
    forgery.claim_origin(origin_a)
    record = forgery.record()
    record["result"]["throughput_samples_per_sec"] = 1000.0
    forgery.set_record(record)
    refused(cli, forgery.write(tmp_path / "bundles" / "edited.tar.gz"), workspace, "was imported before",
            "with other content")


# --- bombs, oversized members, truncated and damaged archives, links -------------------------------

WRAP = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], stdin=subprocess.DEVNULL); "
        "print(f'MAXRSS_KB {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}', file=sys.stderr); "
        "sys.exit(p.returncode)")


def peak_memory_kb(cli: CkCli, bundle: Path, store: Store) -> tuple[int, str]:
    proc = subprocess.Popen([sys.executable, "-c", WRAP, cli.exe, "import", "study", f"--in={bundle}",
                             f"--store={store.root}"], env=cli.env, cwd=cli.root, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    finishes(proc, 300)
    out = proc.stdout.read()
    peak = int(next(line.split()[1] for line in out.splitlines() if line.startswith("MAXRSS_KB")))
    return peak, "\n".join(line for line in out.splitlines() if not line.startswith("MAXRSS_KB"))


def zeros(path: Path, head: bytes, megabytes: int) -> Path:
    with gzip.open(path, "wb", compresslevel=9) as out:
        out.write(head)
        block = b"\0" * (1 << 20)
        for _ in range(megabytes):
            out.write(block)
    return path


def test_bombs_are_refused_without_reading_them_into_memory(cli, workspace, evaluator_a, tmp_path):
    baseline, out = peak_memory_kb(cli, tmp_path / "bundles" / "missing.tar.gz", workspace)
    assert "there is no such file" in out
    forgery = forgery_of(workspace)
    manifest = forgery.build_manifest()
    header = tarfile.TarInfo("manifest.json")
    data = json.dumps(manifest).encode()
    header.size = len(data)
    head = header.tobuf(format=tarfile.PAX_FORMAT) + data + b"\0" * (-len(data) % 512)
    # a valid signed manifest, then 600 MB of zeros where the next header should be (the archive ends early)
    bomb = zeros(tmp_path / "bundles" / "zeros.tar.gz", head, 600)
    assert bomb.stat().st_size < 2_000_000
    before = snapshot(workspace.root)
    peak, out = peak_memory_kb(cli, bomb, workspace)
    one_clear_line(out, "refusing bundle", "truncated")
    expect(peak < baseline + MEMORY_HEADROOM_KB, "other", f"import of a bomb peaked at {peak} kB ({baseline} kB base)")
    # a long-name (pax) header of 600 MB after the manifest: tarfile would read it whole
    pax = tarfile.TarInfo("././@PaxHeader")
    pax.type, pax.size = tarfile.XHDTYPE, 600 << 20
    bomb = zeros(tmp_path / "bundles" / "pax.tar.gz", head + pax.tobuf(format=tarfile.USTAR_FORMAT), 600)
    peak, out = peak_memory_kb(cli, bomb, workspace)
    one_clear_line(out, "refusing bundle", "holds more than its manifest declares")
    expect(peak < baseline + MEMORY_HEADROOM_KB, "other", f"import of a pax bomb peaked at {peak} kB")
    # nothing but zeros
    peak, out = peak_memory_kb(cli, zeros(tmp_path / "bundles" / "only-zeros.tar.gz", b"", 600), workspace)
    one_clear_line(out, "refusing bundle", "does not start with manifest.json")
    expect(peak < baseline + MEMORY_HEADROOM_KB, "other", f"import of zeros peaked at {peak} kB")
    expect(snapshot(workspace.root) == before, "data-lost", "a refused bomb changed the store")


def test_sizes_beyond_the_manifest_or_the_limits_are_refused(cli, workspace, tmp_path):
    forgery = forgery_of(workspace)
    log = next(m for m in forgery.members if m.name.endswith(".log"))
    log.size = 2_000_000_000  # the header claims 2 GB; the manifest lists the real size
    refused(cli, forgery.write(tmp_path / "bundles" / "oversized.tar.gz"), workspace,
            "is 2000000000 bytes in the archive, not the")
    log.size = None
    forgery.manifest["total_bytes"] = 5 << 30
    refused(cli, forgery.write(tmp_path / "bundles" / "total.tar.gz"), workspace, "total_bytes must be from 0 to")
    forgery.manifest.pop("total_bytes")
    forgery.manifest["padding"] = "x" * (MAX_MANIFEST_BYTES + 1)
    refused(cli, forgery.write(tmp_path / "bundles" / "manifest.tar.gz"), workspace, "manifest.json is",
            f"more than {MAX_MANIFEST_BYTES}")
    forgery.manifest.pop("padding")
    record = forgery.record()
    record["provenance"].update({f"k{i}": "x" * 90_000 for i in range(50)})
    forgery.set_record(record)
    refused(cli, forgery.write(tmp_path / "bundles" / "record.tar.gz"), workspace,
            f"more than a record may be ({MAX_RECORD_BYTES})")


def test_truncated_and_damaged_archives_name_the_cause(cli, workspace, evaluator_a, tmp_path):
    _, bundle = evaluator_a
    data = bundle.read_bytes()
    for cut in (60, len(data) // 2, len(data) - 30):
        short = tmp_path / "bundles" / f"cut-{cut}.tar.gz"
        short.write_bytes(data[:cut])
        for study in ("study", STUDY):  # the study from the bundle's manifest, or given
            refused(cli, short, workspace, "truncated", study=study)
    damaged = bytearray(data)
    for i in range(len(data) // 2, len(data) // 2 + 64):
        damaged[i] ^= 0x5A
    (tmp_path / "bundles" / "damaged.tar.gz").write_bytes(bytes(damaged))
    line = refused(cli, tmp_path / "bundles" / "damaged.tar.gz", workspace)
    assert any(word in line for word in ("damaged", "checksum", "truncated")), line
    (tmp_path / "bundles" / "text.tar.gz").write_text("not a bundle\n")
    refused(cli, tmp_path / "bundles" / "text.tar.gz", workspace, "not a .tar.gz")


LINKS = [
    (Member("records/x.json", type=tarfile.SYMTYPE, linkname="/etc/passwd", listed=False), "a symbolic link"),
    (Member("runs/x/attempt-1/logs/worker-0.log", type=tarfile.LNKTYPE, linkname="../../../../../etc/passwd",
            listed=False), "a hard link"),
    (Member("runs/x/attempt-1", type=tarfile.DIRTYPE, listed=False), "a folder"),
    (Member("runs/x/attempt-1/dev", type=tarfile.CHRTYPE, listed=False), "a device or pipe"),
    (Member("runs/x/attempt-1/fifo", type=tarfile.FIFOTYPE, listed=False), "a device or pipe"),
    (Member("/tmp/evil.json", b"{}", listed=False), "not listed in its manifest"),
    (Member("runs/x/attempt-1/../../../../evil", b"{}", listed=False), "not listed in its manifest"),
    (Member("records/../../evil.json", b"{}"), "must be records/<record id>.json"),
]


@pytest.mark.parametrize("member, words", LINKS, ids=[w for _, w in LINKS])
def test_links_devices_and_stray_paths_in_the_archive_are_refused(cli, workspace, tmp_path, member, words):
    forgery = forgery_of(workspace)
    forgery.members.insert(1, member)
    refused(cli, forgery.write(tmp_path / "bundles" / "links.tar.gz"), workspace, words)


def test_member_order_duplicates_and_strays_are_refused(cli, workspace, tmp_path):
    forgery = forgery_of(workspace)
    refused(cli, forgery.write(tmp_path / "bundles" / "late.tar.gz", manifest_first=False), workspace,
            "does not start with manifest.json")
    forgery.members.append(Member(forgery.members[0].name, forgery.members[0].data, listed=False))
    refused(cli, forgery.write(tmp_path / "bundles" / "twice.tar.gz"), workspace, "appears twice")
    forgery.members.pop()
    # One path as a file and as a folder: refused as such, not as the store's "File exists".
    first_run = next(m for m in forgery.members if m.name.startswith("runs/"))
    forgery.members.append(Member(f"{first_run.name}/inside.log", b"x"))
    refused(cli, forgery.write(tmp_path / "bundles" / "file-folder.tar.gz"), workspace,
            "is both a file and a folder of the bundle's files")
    forgery.members.pop()
    forgery.members.append(Member("runs/no-such-record/attempt-1/x.log", b"x"))
    refused(cli, forgery.write(tmp_path / "bundles" / "stray.tar.gz"), workspace, "no-such-record",
            "has no record in it")


def test_an_import_killed_or_interrupted_midway_stores_nothing(cli, workspace, tmp_path):
    forgery = forgery_of(workspace)
    log = next(m for m in forgery.members if m.name.endswith(".log"))
    log.data = b"\0" * (400 << 20)  # long enough to stop it while it streams
    bundle = forgery.write(tmp_path / "bundles" / "large.tar.gz")
    before = snapshot(workspace.root)
    for sig in (signal.SIGKILL, signal.SIGINT):
        stale = set(workspace.root.glob(".import-staging-*"))  # the killed import's
        proc = cli.popen("import", "study", f"--in={bundle}", f"--store={workspace.root}")
        staging = wait_for(lambda stale=stale: set(workspace.root.glob(".import-staging-*")) - stale,
                           timeout=120, interval=0.01)
        assert staging, "the import never started streaming"
        proc.send_signal(sig)
        code = finishes(proc, 60)
        out = proc.stdout.read()
        expect(code != 0, "unclear", f"an import stopped by {sig.name} exited 0:\n{out}")
        if sig == signal.SIGINT:
            one_clear_line(out, "interrupted", "nothing was imported")
            expect(not list(workspace.root.glob(".import-staging-*")), "data-lost", "Ctrl-C left the staging folder")
        expect(not workspace.imported_dir.exists(), "data-lost", f"a stopped import left runs visible:\n{out}")
        expect({k: v for k, v in snapshot(workspace.root).items() if not k.startswith(".import-staging-")} == before,
               "data-lost", "a stopped import changed the store")
    log.data = b"x"
    assert "imported 6 run(s)" in imported(cli, forgery.write(tmp_path / "bundles" / "small.tar.gz"), workspace)
    assert not list(workspace.root.glob(".import-staging-*"))  # the killed import's, removed by the next one


# --- concurrent imports -------------------------------------------------------------------------------

def test_concurrent_imports_serialise_and_count_each_run_once(cli, workspace, evaluator_a, tmp_path):
    _, bundle_a = evaluator_a
    store_c = filled_store(tmp_path / "c", "host-c", values=((50.0, 51.0, 49.0), (60.0, 61.0, 59.0)))
    bundle_c = tmp_path / "bundles" / "c.tar.gz"
    assert run_ck(cli, "export", STUDY, f"--store={store_c.root}", f"--out={bundle_c}")[0] == 0
    procs = [cli.popen("import", "study", f"--in={b}", f"--store={workspace.root}")
             for b in (bundle_a, bundle_c, bundle_a, bundle_c)]
    outputs = []
    for proc in procs:
        code = finishes(proc, 180)
        out = proc.stdout.read()
        no_traceback(out)
        assert code == 0, out
        outputs.append(out)
    assert sum("imported 6 run(s)" in out for out in outputs) == 2
    assert sum("every run of this bundle was imported before" in out for out in outputs) == 2
    assert len(list(workspace.imported_dir.iterdir())) == 2
    assert not list(workspace.root.glob(".import-staging-*"))
    counts = runs_per_setup(report_json(cli, workspace))
    assert sorted(counts.values()) == [6, 6, 6]


@pytest.mark.fault("concurrent")
def test_an_import_behind_another_says_it_waits_and_one_behind_a_stopped_one_is_refused_at_once(
        cli, workspace, evaluator_a):
    """The lock is a flock on the store's folder; its holder is found in /proc/locks."""
    _, bundle = evaluator_a
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(workspace.root)!r}, os.O_RDONLY | os.O_DIRECTORY)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(3)\n")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        code, out = run_ck(cli, "import", "study", f"--in={bundle}", f"--store={workspace.root}")
        assert code == 0, out  # it waited for the holder's 3 s
        assert f"study: waiting for another import into {workspace.root} (pid {holder.pid}) to finish" in out
    finally:
        holder.wait(timeout=30)
    frozen = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, time\n"
        f"fd = os.open({str(workspace.root)!r}, os.O_RDONLY | os.O_DIRECTORY)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(600)\n")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert frozen.stdout.readline() == "held\n"
        frozen.send_signal(signal.SIGSTOP)
        code, out = run_ck(cli, "import", "study", f"--in={bundle}", f"--store={workspace.root}", timeout=30)
        line = one_clear_line(out, f"(pid {frozen.pid}) is stopped (SIGSTOP or a tracer) and holds the store",
                              f"kill -CONT {frozen.pid}")
        assert code != 0, line
    finally:
        frozen.kill()
        frozen.wait()


def test_a_report_on_a_store_that_does_not_exist_is_refused_and_makes_nothing(cli, tmp_path):
    missing = tmp_path / "no-such-store"
    code, out = run_ck(cli, "report", STUDY, f"--store={missing}")
    assert code != 0
    one_clear_line(out, "there is no study store at", str(missing), "--store")
    assert not missing.exists()

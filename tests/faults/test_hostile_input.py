"""Hostile files and values given to ck (fault class: hostile-input): cluster descriptions that are alias bombs,
deeply nested, with repeated or non-name keys or thousands of hosts, descriptions and store files that are
devices or FIFOs, and values of 100 KB. Each must end in one short line naming the problem and the fix, within
seconds: never a traceback, a hang, a killed process or a message that repeats the whole value.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import time

import pytest

from reprokit.ck.program import unknown_setting
from reprokit.cluster.hosts import MAX_HOSTS, parse
from reprokit.core.errors import UserError
from reprokit.core.values import SHOWN_CHARACTERS, plain_setting, whole_number
from reprokit.study.analysis import analyse as analysis
from reprokit.study.store import bundle
from support.bundles import filled_store
from support.ckcli import CkCli, own_ck
from support.faults import FaultFailure, expect, finishes, one_clear_line

pytestmark = [pytest.mark.fault("hostile-input"), pytest.mark.parallel]  # ck commands only: no testbed, no training, no timing
REFUSED_WITHIN_S = 20.0  # ck's own start-up included; the refusals themselves take well under a second
SHORT_LINE = 300  # characters: a refusal names the problem, it does not repeat the input
HUGE = 100_000  # characters of a hostile value


@pytest.fixture(scope="module")
def cli(tmp_path_factory) -> CkCli:
    return own_ck(tmp_path_factory.mktemp("ck"))


def refused_in_one_short_line(cli: CkCli, args: list[str], *names: str) -> str:
    """Run ck with ``args``: exit 1 within REFUSED_WITHIN_S, one line naming ``names``, shorter than SHORT_LINE."""
    started = time.monotonic()
    proc = cli.popen(*args)
    try:
        code = finishes(proc, REFUSED_WITHIN_S)
    finally:
        output = proc.stdout.read() if proc.stdout else ""
        if proc.stdout:
            proc.stdout.close()
    expect(code == 1, "other", f"exit {code} after {time.monotonic() - started:.1f} s:\n{output[-2000:]}")
    line = one_clear_line(output, *names)
    expect(len(line) < SHORT_LINE, "unclear", f"a {len(line)}-character message: {line[:400]}")
    return line


def alias_bomb(levels: int = 9) -> str:
    """The 'billion laughs': each level's list holds nine aliases of the one before (9**9 strings expanded)."""
    names = [f"l{i}" for i in range(levels)]
    lines = [f'{names[0]}: &{names[0]} ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"{n}: &{n} [{', '.join([f'*{prev}'] * 9)}]" for prev, n in zip(names, names[1:])]
    return "\n".join(lines) + f"\nhosts: *{names[-1]}\n"


DESCRIPTIONS = [  # (file name, content, what the one line must name)
    ("bomb.yaml", alias_bomb(), ["bomb.yaml", "with its aliases expanded it holds", "alias bomb"]),
    ("aliases.yaml", "x: &x a\nhosts: [" + ", ".join(["*x"] * 500) + "]\n", ["more than 100 aliases"]),
    ("deep.yaml", "hosts: " + "[" * 10_000 + "\n", ["deep.yaml: line 1", "nests deeper than 20 levels"]),
    ("deep.json", "[" * 100_000 + "]" * 100_000, ["deep.json", "nests deeper than 20 levels"]),
    ("mixed.yaml", "hosts: [node1]\n1: x\n", ["mixed.yaml: line 2", "the key 1 is not a name"]),
    ("repeated.yaml", "hosts: [node1, node2]\nuser: me\nhosts: [node3]\n",
     ["repeated.yaml: line 3", "the key 'hosts' is given twice (first at line 1)", "give each key once"]),
    ("repeated.json", '{"hosts": ["node1", "node2"], "hosts": ["node3"]}',
     ["repeated.json", "the key 'hosts' is given twice", "give each key once"]),
    ("recursive.yaml", "hosts: &h [node1, *h]\n", ["recursive anchor"]),
    ("huge.json", json.dumps([f"node{i}.example.org" for i in range(300_000)]),  # 6.6 MB
     ["huge.json is", "bytes; a cluster description is at most 1 MiB"]),
    ("many.yaml", "hosts:\n" + "".join(f"- n{i}\n" for i in range(60_000)),  # under 1 MiB, 60,000 hosts
     ["the list holds 60000 hosts", f"at most {MAX_HOSTS}"]),
    ("long.yaml", f"hosts:\n- host: {'x' * HUGE}\n", ["host must be a host name or address, got 'xxxx", f"({HUGE} characters)"]),
]


@pytest.mark.parametrize("name, text, names", DESCRIPTIONS, ids=[d[0] for d in DESCRIPTIONS])
def test_hostile_cluster_descriptions_are_refused_in_one_short_line(cli, tmp_path, name, text, names):
    described = tmp_path / name
    described.write_text(text)
    out = tmp_path / "hosts.json"
    refused_in_one_short_line(cli, ["convert", "cluster", f"--config_file={described}", f"--to={out}"], *names)
    expect(not out.exists(), "other", f"a refused description was written to {out}")


@pytest.mark.parametrize("device, kind", [("/dev/zero", "a character device"), ("/dev/urandom", "a character device"),
                                          ("fifo", "a FIFO (named pipe)")])
def test_a_description_that_is_a_device_or_a_fifo_is_refused_without_reading_it(cli, tmp_path, device, kind):
    if device == "fifo":
        device = str(tmp_path / "cluster.yaml")
        os.mkfifo(device)  # with no writer, opening it for reading would wait forever
    refused_in_one_short_line(cli, ["convert", "cluster", f"--config_file={device}", f"--to={tmp_path / 'h.json'}"],
                              f"{device} is {kind}, not a regular file", "a cluster description must be a regular file")


@pytest.mark.parametrize("replace, names", [
    ("origin.key", ["origin.key is a character device, not a regular file",
                    "the store's signing key must be a regular file"]),
    ("record", ["is a FIFO (named pipe), not a regular file", "a run record must be a regular file"]),
    ("origin.json", ["origin.json is", "bytes; the store's origin is at most 32 MiB"]),
])
def test_store_files_that_are_devices_fifos_or_huge_are_refused_in_one_line(cli, tmp_path, replace, names):
    store = filled_store(tmp_path / "store", "host-a")
    if replace == "origin.key":
        key = store.root / "origin.key"
        key.unlink()
        key.symlink_to("/dev/zero")  # read to its end, it would fill memory
    elif replace == "record":
        os.mkfifo(store.records_dir / "zz-fifo.json")
    else:
        with open(store.root / "origin.json", "r+b") as handle:
            handle.truncate(40 << 20)  # sparse: 40 MB of zeros read as nothing but take no disk
    refused_in_one_short_line(cli, ["export", "study:sysml19-p3", f"--store={store.root}",
                                    f"--out={tmp_path / 'out.tar.gz'}"], *names)


STUDY = "study:sysml19-p3"
PREDICT = ["predict", STUDY, "--model=resnet", "--bandwidths=1gbit", "--workers=4"]
LONG_VALUE_LINE = 500  # characters: the problem, the fix, and the value clipped (80; a path 240, to be found)
# One refusal per option class, each given a 100,000-character value (V) or path (P): (arguments, words it names).
LONG_VALUES = {
    "run --cmd_key": (["run", "program:p3", "--cmd_key=V"], ["unknown --cmd_key"]),
    "run --target": (["run", "program:p3", "--target=V"], ["no machine entry", "--target"]),
    "run --env.VARIANT": (["run", "program:p3", "--env.VARIANT=V"], ["VARIANT='vvv", "too long for a setting"]),
    "reproduce --models": (["reproduce", STUDY, "--models=V"], ["unknown model(s)"]),
    "reproduce --models, 50,000 names": (["reproduce", STUDY, "--models=" + "a," * 50_000], ["unknown model(s)"]),
    "reproduce --bandwidths": (["reproduce", STUDY, "--bandwidths=V"], ["bandwidth", "is not a rate"]),
    "reproduce --target": (["reproduce", STUDY, "--target=V"], ["no machine entry"]),
    "reproduce --store": (["reproduce", STUDY, "--store=P"], ["--store=", "cannot use it"]),
    "report --store": (["report", STUDY, "--store=P"], ["there is no study store"]),
    "report --out_dir": (["report", STUDY, "--out_dir=P"], ["--out_dir=", "cannot use it"]),
    "predict --gpu": ([*PREDICT, "--gpu=V"], ["unknown --gpu"]),
    "predict --gpu=measured:FILE": ([*PREDICT, "--gpu=measured:P"], ["--gpu=", "is not a file"]),
    "predict --image_shape": ([*PREDICT, "--image_shape=V"], ["no layer profile", "image shape"]),
    "export --out": (["export", STUDY, "--out=P.tar.gz"], ["--out=", "cannot use it"]),
    "export --store": (["export", STUDY, "--store=P", "--out=b.tar.gz"], ["too long", "shorten the name"]),
    "import --in": (["import", "study", "--in=P"], ["refusing bundle", "no such file"]),
    "check cluster:NAME": (["check", "cluster:V"], ["no machine entry"]),
    "convert --config_file": (["convert", "cluster", "--config_file=P"], ["cannot read", "a cluster description"]),
}


@pytest.mark.fault("message")
@pytest.mark.parametrize("args, names", LONG_VALUES.values(), ids=LONG_VALUES.keys())
def test_a_100_kb_value_of_any_option_is_refused_in_one_line_that_clips_it(cli, tmp_path, args, names):
    value, path = "v" * HUGE, f"{tmp_path}/{'p' * HUGE}"
    given = [a.replace("=V", f"={value}").replace("cluster:V", f"cluster:{value}")
             .replace("=P", f"={path}").replace("measured:P", f"measured:{path}") for a in args]
    proc = cli.popen(*given)
    try:  # read while it runs: a hang must not be hidden by a full pipe
        output, _ = proc.communicate(timeout=REFUSED_WITHIN_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise FaultFailure("hang", f"ck {given[0]} still running after {REFUSED_WITHIN_S} s") from None
    code = proc.returncode
    expect(code != 0, "unclear", f"exit 0 after a refusal:\n{output[-2000:]}")
    line = one_clear_line(output, *names)
    # Stock CK prints the run script it prepares, every setting's `export NAME=VALUE` whole: an overlong setting is
    # refused before that, so no line of the output repeats the value.
    longest = max(output.splitlines(), key=len)
    expect(len(longest) < LONG_VALUE_LINE, "unclear",
           f"a {len(longest)}-character line: {longest[:300]}…; the refusal: {line[:300]}")


# CK exits with its run script's code: --extra_post_process_cmd's commands run after ours, and --extra_run_cmd is
# appended to our command line, so either can make it 0 after a refusal or a failed run.
@pytest.mark.fault("message")
@pytest.mark.parametrize("option", ["--extra_post_process_cmd=true", "--extra_run_cmd=|| true"])
def test_a_refused_run_exits_non_zero_whatever_ck_option_ends_the_script(cli, tmp_path, option):
    proc = cli.popen("run", "program:p3", "--env.VARIANT=worker", f"--tmp_dir={tmp_path / 'run'}", option)
    output, _ = proc.communicate(timeout=60)
    one_clear_line(output, "p3: error: unknown VARIANT 'worker'")
    expect(proc.returncode == 2, "unclear", f"exit {proc.returncode} after the refusal, given {option}:\n{output[-2000:]}")


@pytest.mark.fault("message")
@pytest.mark.parametrize("refuse, names", [
    (lambda v: whole_number(v, "BATCH_SIZE", "--env.BATCH_SIZE=N"), ["BATCH_SIZE must be a whole number"]),
    (lambda v: plain_setting("DATA_DIR", v + ";", "CK writes it into a script"), ["DATA_DIR='"]),
    (lambda v: parse([v]), ["host #1.host must be a host name or address, got '"]),
    (lambda v: parse({"hosts": ["a"], v: 1}), ["unknown key(s) '"]),
    (lambda v: parse([f"n{i}" for i in range(MAX_HOSTS + 1)]), [f"the list holds {MAX_HOSTS + 1} hosts"]),
])
def test_messages_clip_the_values_they_quote(refuse, names):
    value = "v" * HUGE
    with pytest.raises(UserError) as refused:
        refuse(value)
    message = str(refused.value)
    one_clear_line(message, *names)
    expect("v" * (SHOWN_CHARACTERS + 1) not in message and len(message) < 2 * SHORT_LINE, "unclear",
           f"the value was not clipped: a {len(message)}-character message: {message[:400]}")
    expect("vvvv" not in message or f"({HUGE} characters)" in message or f"({HUGE + 1} characters)" in message,
           "unclear", f"a clipped value does not say how long it was: {message[:400]}")


@pytest.mark.fault("message")
def test_an_unknown_setting_of_100_kb_is_named_clipped():
    why = unknown_setting(["X" * HUGE], ["NUM_WORKERS", "BATCH_SIZE"])
    expect(why is not None and len(why) < SHORT_LINE and f"({HUGE} characters)" in why, "unclear", str(why)[:400])


@pytest.mark.fault("bundle")
def test_a_bundle_from_a_store_claiming_this_hostname_is_never_shown_as_here(tmp_path):
    """"here" means the store's own runs (records/), never a bundle's, whatever host its origin names: here,
    the other store is on this very machine, so its origin's host is this host's name."""
    other = filled_store(tmp_path / "other", "host-b")
    assert other.origin().host == socket.gethostname()
    bundle.export(other, tmp_path / "other.tar.gz")
    store = filled_store(tmp_path / "store", "host-a")
    bundle.import_bundle(store, tmp_path / "other.tar.gz")
    local = {analysis.setup_label(r) for r in store.local_records()}
    imported = {analysis.setup_label(r) for r in store.imported_records()}
    assert all(label.endswith("[here]") for label in local), local
    expect(imported and not any("[here]" in label for label in imported), "other",
           f"an imported bundle was labelled as this store's runs: {imported}")
    assert all(other.origin().id[:8] in label for label in imported), imported

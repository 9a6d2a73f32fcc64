"""The repository as the real ck loads it: entries, aliases, UIDs, the os and wfe entries."""
import json
import re

import pytest

from support.ckcli import REPO_ROOT, own_ck

pytestmark = pytest.mark.parallel  # ck commands in a CK of each test's own: no testbed, no training, no timing

UID = re.compile(r"^[0-9a-f]{16}$")
MODULE_DIRS = sorted(p.name[len("alias-a-"):] for p in (REPO_ROOT / ".cm").glob("alias-a-*"))
ENTRIES = [(m, e.name) for m in MODULE_DIRS for e in sorted((REPO_ROOT / m).iterdir())
           if e.is_dir() and e.name != ".cm"]

# Keys of the os entry that stock CK 2.6.4 reads on the paths we use (install, detect, run).
OS_KEYS_READ_BY_CK = [
    "batch_prefix", "bin_prefix", "bits", "ck_name", "ck_name2", "dir_sep", "env_call", "env_quotes_if_space",
    "env_quotes_if_space_in_call", "env_separator", "env_set", "env_var_separator", "env_var_start",
    "env_var_stop", "file_extensions", "md5sum", "redirect_stderr", "redirect_stdout", "rem", "script_ext",
    "set_executable", "generic", "priority",
]


@pytest.fixture(scope="module")
def reading_ck(tmp_path_factory):
    """One CK with this repository registered for the module's tests, which only read it (load, search, help)."""
    return own_ck(tmp_path_factory.mktemp("ck"))


def test_repository_description_is_valid():
    ckr = json.loads((REPO_ROOT / ".ckr.json").read_text())
    assert ckr["data_alias"] == "reproduce-sysml19-paper-p3" and UID.match(ckr["data_uid"])


def test_module_dirs_have_consistent_alias_files():
    for module in MODULE_DIRS:
        uid = (REPO_ROOT / ".cm" / f"alias-a-{module}").read_text().strip()
        assert UID.match(uid), module
        assert (REPO_ROOT / ".cm" / f"alias-u-{uid}").read_text().strip() == module


@pytest.mark.parametrize("module,alias", ENTRIES)
def test_every_entry_loads_through_ck_with_consistent_alias_uid_and_tags(reading_ck, module, alias):
    cm = REPO_ROOT / module / alias / ".cm"
    info = json.loads((cm / "info.json").read_text())
    uid = info["backup_data_uid"]
    assert UID.match(uid)
    assert (REPO_ROOT / module / ".cm" / f"alias-a-{alias}").read_text().strip() == uid
    # The original workflow's names (program:sysml19-p3, soft:sysml19-p3) are links to ours: one entry, two names.
    name = (REPO_ROOT / module / alias).readlink().name if (REPO_ROOT / module / alias).is_symlink() else alias
    assert (REPO_ROOT / module / ".cm" / f"alias-u-{uid}").read_text().strip() == name
    json.loads((cm / "desc.json").read_text())
    loaded = json.loads(reading_ck("load", f"{module}:{alias}", "--out=json", check=True).stdout)
    assert (loaded["data_uid"], loaded["data_alias"], loaded["repo_uoa"]) == (uid, alias, "reproduce-sysml19-paper-p3")
    assert loaded["dict"].get("tags"), f"{module}:{alias} has no tags"
    found = json.loads(reading_ck("search", module, f"--tags={','.join(loaded['dict']['tags'])}",
                               "--out=json", check=True).stdout)["lst"]
    assert uid in [e["data_uid"] for e in found]


def test_os_entry_has_every_key_stock_ck_reads(reading_ck):
    meta = json.loads(reading_ck("load", "os:linux-64", "--out=json", check=True).stdout)["dict"]
    missing = [k for k in OS_KEYS_READ_BY_CK if k not in meta]
    assert missing == []
    assert (meta["env_set"], meta["redirect_stdout"], meta["redirect_stderr"]) == ("export", ">", "2>")
    assert "standard" in meta["tags"]


def test_show_machine_works(reading_ck):
    proc = reading_ck("show", "machine")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("module", ["cluster", "study"])
def test_our_modules_actions_answer_help(reading_ck, module):
    actions = json.loads((REPO_ROOT / "module" / module / ".cm" / "meta.json").read_text())["actions"]
    for action in actions:
        proc = reading_ck(action, module, "--help")
        assert proc.returncode == 0 and f"ck {action} {module}" in proc.stdout, (action, proc.stdout + proc.stderr)

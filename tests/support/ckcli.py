"""The real ck CLI in isolated CK_REPOS/CK_TOOLS, stdin closed."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


class CkCli:
    """The real ck CLI of the framework's environment, in isolated CK_REPOS/CK_TOOLS, stdin closed."""

    def __init__(self, root: Path):
        self.root = root
        self.exe = str(Path(sys.executable).with_name("ck"))
        self.env = {**os.environ, "CK_REPOS": str(root / "repos"), "CK_TOOLS": str(root / "tools")}

    def __call__(self, *args: str, timeout: float = 600, check: bool = False):
        proc = subprocess.run([self.exe, *args], env=self.env, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=timeout, cwd=self.root)
        if check and proc.returncode != 0:
            raise AssertionError(f"ck {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    def popen(self, *args: str, new_session: bool = False, prefix: tuple[str, ...] = (), env: dict | None = None):
        """Start ck in the background; new_session puts it in its own process group, as a terminal would.
        ``prefix``: what ck runs under (``salloc -N2``, an OAR job's node); ``env``: in place of ours."""
        return subprocess.Popen([*prefix, self.exe, *args], env=env or self.env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=self.root,
                                start_new_session=new_session)

    def run_p3(self, run_dir: Path, *args: str, timeout: float = 600):
        """ck run program:p3 with its own run folder; returns (process, CK's JSON output)."""
        out_file = run_dir / "ck-output.json"
        proc = self(
            "run", "program:p3", f"--tmp_dir={run_dir}", "--out=json_file", f"--out_file={out_file}",
            "--treat_return_code_as_exit_code=yes", *args, timeout=timeout)
        return proc, (json.loads(out_file.read_text()) if out_file.exists() else None)


def bootstrap(ck: CkCli) -> None:
    proc = subprocess.run([sys.executable, "-m", "reprokit.bootstrap"], env=ck.env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout + proc.stderr




def own_ck(root: Path, engine_from: CkCli | None = None) -> CkCli:
    """A CK of its own in ``root`` with this repository registered; given ``engine_from``, that CK's installed
    MXNet engine is detected here (not reinstalled)."""
    root.mkdir(parents=True, exist_ok=True)
    cli = CkCli(root)
    cli("import", "repo", f"--path={REPO_ROOT}", "--quiet", check=True)
    if engine_from is not None:
        found = engine_from("search", "env", "--tags=lib,mxnet", "--add_meta", "--out=json", check=True)
        [engine] = json.loads(found.stdout)["lst"]
        cli("detect", "soft:lib.mxnet", f"--search_dirs={engine['meta']['env']['CK_ENV_LIB_MXNET']}", "--quiet",
            check=True, timeout=300)
    return cli

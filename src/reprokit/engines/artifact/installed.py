"""A registered install of the authors' artifact: its manifest, and the CK env keys soft:tool.p3 registers.

The installer (``engines.artifact.install``) writes ``artifact/artifact.json``
(``Manifest``); ``ck detect soft:tool.p3`` reads it back (``load_installed``) and
registers ``ArtifactEnv.of(installed).to_env()``; a run reads that env entry
back with ``ArtifactEnv.from_env``.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from reprokit.core.errors import UserError
from reprokit.engines.base import ARTIFACT, builds

ENV_PREFIX = "CK_ENV_TOOL_SYSML19_P3"  # the seed's soft:tool.p3 prefix
MANIFEST = "artifact.json"  # written by the installer; what soft:tool.p3 detects
INSTALLED = "artifact"  # INSTALL_DIR/artifact: src/ (built tree), prefix/ (python), artifact.json
P3_PACKAGES_HINT = "ck install package:sysml19-p3-github (or package:sysml19-p3-zenodo)"
BASELINE_PACKAGE_HINT = "ck install package:sysml19-p3-baseline-github"


@dataclass
class Manifest:
    """What was installed, recorded in INSTALL_DIR/artifact/artifact.json and read back by soft:tool.p3."""
    build: str
    package: str
    source: dict[str, Any]
    commit: str
    version: str  # the python package's mxnet.__version__
    cuda: str  # toolkit folder; empty for a CPU build
    cudnn: bool
    make: list[str]
    installed_at: str
    python: str = "prefix/bin/python"  # relative to the manifest's folder
    tree: str = "src"
    extra: dict[str, Any] = field(default_factory=dict)
    patches: list[Any] = field(default_factory=list)  # our patches applied to the tree, in order
    missing: list[Any] = field(default_factory=list)  # files of the commit absent from the source (not checked out)
    sockeye: dict[str, Any] = field(default_factory=dict)  # where example/sockeye came from when the tree lacked it
    build_s: float = 0.0  # wall seconds of make

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class InstalledArtifact:
    root: Path  # the folder holding artifact.json
    manifest: Manifest

    @property
    def tree(self) -> Path:
        return self.root / self.manifest.tree

    @property
    def python(self) -> Path:
        return self.root / self.manifest.python


def load_installed(manifest_path: str | Path) -> InstalledArtifact:
    path = Path(manifest_path)
    try:
        data = json.loads(path.read_text())
        manifest = Manifest(**data)
    except (OSError, ValueError, TypeError) as exc:
        raise UserError(f"{path} is not an artifact manifest written by `ck install package:sysml19-p3-*` ({exc}); "
                        f"reinstall with: {P3_PACKAGES_HINT}") from None
    if manifest.build not in builds(ARTIFACT):
        raise UserError(f"{path} names an unknown build {manifest.build!r}; reinstall the package")
    return InstalledArtifact(path.parent, manifest)


def build_tag(build: str) -> str:
    """The tag the packages give each build (p3-build, baseline-build); `ck detect soft:tool.p3` adds it too."""
    return f"{build}-build"


@dataclass(frozen=True)
class ArtifactEnv:
    """The CK env keys of one registered artifact install: written by soft:tool.p3, read back by a run.

    ``CK_ENV_TOOL_SYSML19_P3`` is the artifact's source tree, as in the seed.
    """
    tree: str
    python: str
    build: str  # p3 | baseline
    commit: str
    cuda: bool
    lib: str
    manifest: str
    installed_at: str

    # field -> its key's suffix after ENV_PREFIX
    KEYS: ClassVar[dict[str, str]] = {"tree": "", "python": "_PYTHON", "build": "_BUILD", "commit": "_COMMIT",
                                      "cuda": "_CUDA", "lib": "_LIB", "manifest": "_MANIFEST",
                                      "installed_at": "_INSTALLED_AT"}

    @classmethod
    def of(cls, installed: InstalledArtifact) -> ArtifactEnv:
        m = installed.manifest
        return cls(tree=str(installed.tree), python=str(installed.python), build=m.build, commit=m.commit,
                   cuda=bool(m.cuda), lib=str(installed.tree / "lib"), manifest=str(installed.root / MANIFEST),
                   installed_at=m.installed_at)

    def to_env(self) -> dict[str, str]:
        values = {**asdict(self), "cuda": "1" if self.cuda else "0"}
        return {f"{ENV_PREFIX}{suffix}": values[name] for name, suffix in self.KEYS.items()}

    @classmethod
    def from_env(cls, variables: Mapping[str, str]) -> ArtifactEnv:
        """What an env entry registered (a key it lacks reads as empty)."""
        values = {name: str(variables.get(f"{ENV_PREFIX}{suffix}", "")) for name, suffix in cls.KEYS.items()}
        cuda = values.pop("cuda") == "1"
        return cls(**values, cuda=cuda)


"""CK soft hooks of the authors' artifact (P3 or baseline build) (reprokit is installed in ck's own environment by `make setup`)."""
from reprokit.ck.soft import installed_dirs as dirs, artifact_limit as limit, artifact_version as version_cmd, artifact_setup as setup  # noqa: F401

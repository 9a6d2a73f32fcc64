"""CK soft hooks of IWSLT15 en-vi corpus folders (reprokit is installed in ck's own environment by `make setup`)."""
from reprokit.ck.soft import installed_dirs as dirs, iwslt_limit as limit, iwslt_version as version_cmd, iwslt_setup as setup  # noqa: F401

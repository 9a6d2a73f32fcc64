"""CK soft hooks of Sockeye installed for the MXNet engine (reprokit is installed in ck's own environment by `make setup`)."""
from reprokit.ck.soft import installed_dirs as dirs, sockeye_limit as limit, sockeye_version as version_cmd, sockeye_setup as setup  # noqa: F401

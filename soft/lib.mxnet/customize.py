"""CK soft hooks of the stock MXNet engine (reprokit is installed in ck's own environment by `make setup`)."""
from reprokit.ck.soft import installed_dirs as dirs, mxnet_limit as limit, mxnet_version as version_cmd, mxnet_setup as setup  # noqa: F401

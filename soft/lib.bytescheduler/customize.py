"""CK soft hooks of ByteScheduler installed for the MXNet engine (reprokit is installed in ck's own environment by `make setup`)."""
from reprokit.ck.soft import bytescheduler_limit as limit, bytescheduler_setup as setup, bytescheduler_version as version_cmd, installed_dirs as dirs  # noqa: F401

"""CK package hook: refuses shell syntax in the install variables (reprokit is installed in ck's own environment by `make setup`)."""
from reprokit.ck.package import framework_setup as setup  # noqa: F401

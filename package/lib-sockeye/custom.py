"""CK package hooks: repair env entries of an older reprokit, refuse shell syntax in the install variables (reprokit is installed in ck's own environment by `make setup`)."""
from reprokit.ck.package import framework_pre_path as pre_path, framework_setup as setup  # noqa: F401

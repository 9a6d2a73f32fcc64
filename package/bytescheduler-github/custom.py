"""CK package hook: the install script runs reprokit with the framework's interpreter (reprokit is installed in ck's own environment by `make setup`)."""
from reprokit.ck.package import framework_pre_path as pre_path, framework_setup as setup  # noqa: F401

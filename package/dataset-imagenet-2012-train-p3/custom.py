"""CK package hooks of the RecordIO conversion: choose the source (pre_path), refuse shell syntax in the install variables (reprokit is installed in ck's own environment by `make setup`)."""
from reprokit.ck.package import recordio_pre_path as pre_path, framework_setup as setup  # noqa: F401

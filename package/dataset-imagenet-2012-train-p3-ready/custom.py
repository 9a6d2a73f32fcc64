"""CK package hooks: PACKAGE_URL required (the authors' FTP is not assumed up), then the framework's interpreter (reprokit is installed in ck's own environment by `make setup`)."""
from reprokit.ck.package import recordio_ready_pre_path as pre_path, framework_setup as setup  # noqa: F401

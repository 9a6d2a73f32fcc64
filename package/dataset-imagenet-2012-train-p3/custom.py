"""CK package hook of the RecordIO conversion (reprokit is installed in ck's own environment by `make setup`)."""
from reprokit.ck.package import recordio_setup as setup  # noqa: F401

"""CK soft hook of RecordIO ImageNet train sets (reprokit is installed in ck's own environment by `make setup`)."""
from reprokit.ck.soft import recordio_setup as setup  # noqa: F401

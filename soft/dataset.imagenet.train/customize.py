"""CK soft hooks of ImageNet train folders (reprokit is installed in ck's own environment by `make setup`)."""
from reprokit.ck.soft import imagenet_dirs as dirs, imagenet_limit as limit, imagenet_version as version_cmd, imagenet_setup as setup  # noqa: F401

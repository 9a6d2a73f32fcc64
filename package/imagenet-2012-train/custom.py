"""CK package hooks: PACKAGE_URL required (ImageNet needs a login), then the framework's interpreter (reprokit is installed in ck's own environment by `make setup`)."""
from reprokit.ck.package import imagenet_train_pre_path as pre_path, framework_setup as setup  # noqa: F401

"""CK soft hooks for ImageNet train folders: thin calls into reprokit."""
import os
import sys

_SRC = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "src"))
if _SRC not in sys.path:
    sys.path.insert(0, _SRC)

from reprokit.ck_boundary import (imagenet_soft_dirs, imagenet_soft_limit, imagenet_soft_setup,  # noqa: E402
                                  imagenet_soft_version)


def dirs(i):
    return imagenet_soft_dirs(i)


def limit(i):
    return imagenet_soft_limit(i)


def version_cmd(i):
    return imagenet_soft_version(i)


def setup(i):
    return imagenet_soft_setup(i)

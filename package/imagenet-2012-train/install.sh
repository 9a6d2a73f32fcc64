#! /bin/bash
# Full ImageNet-1k train set (the original workflow's package, ck-env's imagenet-2012-train) from the
# user's own copy: ImageNet needs a login, so PACKAGE_URL has no default (custom.py refuses an empty one).
# ILSVRC2012_img_train.tar (one tar per class) or a tar of class folders; a file:// URL or a path is
# read in place. MD5-checked (PACKAGE_MD5: the official tar's; another file needs its own), unpacked
# into $INSTALL_DIR/train in a staging folder; an earlier install survives a failure.
set -euo pipefail
: "${INSTALL_DIR:?INSTALL_DIR is empty: refusing to install (check env_set in the os entry)}"
: "${FRAMEWORK_PYTHON:?FRAMEWORK_PYTHON is empty: custom.py of the package did not run}"
PYTHONPATH="$REPROKIT_SRC" exec "$FRAMEWORK_PYTHON" -m reprokit.data.imagenet fetch \
    --url "$PACKAGE_URL" --md5 "$PACKAGE_MD5" --dest "$INSTALL_DIR" --kind imagenet

#! /bin/bash
# The original workflow's ImageNet subset: stream the tarball (PACKAGE_URL), check its MD5
# (PACKAGE_MD5), unpack it into $INSTALL_DIR/train. Everything happens in a staging folder;
# an earlier install is replaced only after success, and CK registers nothing on failure.
# A mirror (or the loopback server of the tests) needs both: --env.PACKAGE_URL=... --env.PACKAGE_MD5=...
set -euo pipefail
: "${INSTALL_DIR:?INSTALL_DIR is empty: refusing to install (check env_set in the os entry)}"
: "${FRAMEWORK_PYTHON:?FRAMEWORK_PYTHON is empty: custom.py of the package did not run}"
PYTHONPATH="$REPROKIT_SRC" exec "$FRAMEWORK_PYTHON" -m reprokit.data.imagenet fetch \
    --url "$PACKAGE_URL" --md5 "$PACKAGE_MD5" --dest "$INSTALL_DIR" --kind imagenet-min

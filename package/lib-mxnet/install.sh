#! /bin/bash
# Install stock MXNet with its pinned numpy into a prefix of its own.
# The prefix is built beside the target and swapped in only when it imports,
# so a failed install never damages an earlier one.
set -euo pipefail

: "${INSTALL_DIR:?INSTALL_DIR is empty: refusing to install (check env_set in the os entry)}"
: "${FRAMEWORK_PYTHON:?FRAMEWORK_PYTHON is empty: customize.py of the package did not run}"

PACKAGE_LABEL=lib-mxnet
INSTALL_FIX="fix that and run ck install package:lib-mxnet again (pip's index: pip config list)"
. "$REPROKIT_SRC/reprokit/ck/install_steps.sh"

prefix="$INSTALL_DIR/prefix"
staging="$INSTALL_DIR/prefix.partial"
rm -rf "$staging"

step "creating the engine's prefix ($FRAMEWORK_PYTHON -m venv)" "$staging"
echo "Creating the engine prefix with $FRAMEWORK_PYTHON ..."
"$FRAMEWORK_PYTHON" -m venv "$staging"
step "pip install mxnet==${MXNET_VERSION} numpy==${NUMPY_VERSION} opencv-python-headless==${OPENCV_VERSION}"
# OpenCV's Python binding too: MXNet's own tools/im2rec.py and mx.recordio.pack_img need cv2
# (the dataset-imagenet-2012-train-p3 conversion); the headless wheel needs no system libraries.
"$staging/bin/python" -m pip install --disable-pip-version-check --no-input \
    "mxnet==${MXNET_VERSION}" "numpy==${NUMPY_VERSION}" "opencv-python-headless==${OPENCV_VERSION}"
step "importing MXNet and OpenCV from the new prefix"
"$staging/bin/python" -c "import mxnet, cv2; print('MXNet', mxnet.__version__, 'with OpenCV', cv2.__version__, 'imports from', mxnet.__path__[0])"

step "swapping the new prefix in ($prefix)"
rm -rf "$prefix.old"
if [ -e "$prefix" ]; then mv "$prefix" "$prefix.old"; fi
mv "$staging" "$prefix"
rm -rf "$prefix.old"
step "" ""

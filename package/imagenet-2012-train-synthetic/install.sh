#! /bin/bash
# A deterministic synthetic train set in ImageNet's layout ($INSTALL_DIR/train/nXXXXXXXX/*.JPEG),
# a few MB, for the embedded default. It is NOT ImageNet: its env carries the tag "synthetic"
# and runs that read it report data "imagenet-synthetic".
set -euo pipefail
: "${INSTALL_DIR:?INSTALL_DIR is empty: refusing to install (check env_set in the os entry)}"
: "${FRAMEWORK_PYTHON:?FRAMEWORK_PYTHON is empty: custom.py of the package did not run}"
PYTHONPATH="$REPROKIT_SRC" exec "$FRAMEWORK_PYTHON" -m reprokit.data.imagenet synthetic --dest "$INSTALL_DIR" \
    --classes "$CLASSES" --images-per-class "$IMAGES_PER_CLASS" --seed "$SEED"

#! /bin/bash
# The authors' converted ImageNet (the original workflow's dataset-imagenet-2012-train-p3-ready):
# imagenet1k_train.rec and imagenet1k_val.rec from the folder PACKAGE_URL (their FTP
# ftp://198.162.52.84/pub, a mirror, or a local folder, whose files are linked, not copied),
# plus the .idx files the original never had, written from the records' headers. Built in
# $INSTALL_DIR/recordio.partial, swapped in as $INSTALL_DIR/recordio only when complete.
set -euo pipefail
: "${INSTALL_DIR:?INSTALL_DIR is empty: refusing to install (check env_set in the os entry)}"
: "${FRAMEWORK_PYTHON:?FRAMEWORK_PYTHON is empty: custom.py of the package did not run}"
PYTHONPATH="$REPROKIT_SRC" exec "$FRAMEWORK_PYTHON" -m reprokit.data.recordio --ready-url "$PACKAGE_URL" --dest "$INSTALL_DIR"

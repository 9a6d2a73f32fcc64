#! /bin/bash
# A deterministic synthetic corpus in IWSLT15 en-vi's layout (src/reprokit/wire/synthetic_corpus.py), into
# $INSTALL_DIR/corpus; NOT IWSLT15 (registered with the tag synthetic). --env.TRAIN_PAIRS=N sizes it.
set -euo pipefail
: "${INSTALL_DIR:?INSTALL_DIR is empty: refusing to install (check env_set in the os entry)}"
: "${FRAMEWORK_PYTHON:?FRAMEWORK_PYTHON is empty: custom.py of the package did not run}"
PYTHONPATH="$REPROKIT_SRC" "$FRAMEWORK_PYTHON" -m reprokit.data.iwslt synthetic --dest "$INSTALL_DIR" \
    --train-pairs "${TRAIN_PAIRS:-0}"

#! /bin/bash
# Convert a registered ImageNet train folder to MXNet RecordIO with the engine's own im2rec
# (list: train ratio 0.95; records: shorter edge 480, JPEG quality 95, NUM_THREADS processes).
# Output is built in $INSTALL_DIR/recordio.partial and swapped in as $INSTALL_DIR/recordio
# only when complete; CK registers it only if this script succeeds.
set -euo pipefail
: "${INSTALL_DIR:?INSTALL_DIR is empty: refusing to install (check env_set in the os entry)}"
: "${ENGINE_PYTHON:?ENGINE_PYTHON is empty: custom.py of the package did not run}"
PYTHONPATH="$REPROKIT_SRC" exec "$ENGINE_PYTHON" -m reprokit.data.recordio --source "$SOURCE_DIR" --dest "$INSTALL_DIR" \
    --kind "$SOURCE_KIND" --threads "$NUM_THREADS" --train-ratio "$TRAIN_RATIO" --resize "$RESIZE" --quality "$QUALITY"

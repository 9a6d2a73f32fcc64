#! /bin/bash
# Fetch, build and install the authors' artifact: every step is reprokit.engines.artifact's
# (staging folder, swapped in only when the build imports; a failed step names itself).
set -euo pipefail
: "${INSTALL_DIR:?INSTALL_DIR is empty: refusing to install (check env_set in the os entry)}"
: "${FRAMEWORK_PYTHON:?FRAMEWORK_PYTHON is empty: custom.py of the package did not run}"
exec env PYTHONPATH="$REPROKIT_SRC" "$FRAMEWORK_PYTHON" -m reprokit.engines.artifact install

#! /bin/bash
# Fetch ByteScheduler (byteps, branch bytescheduler), apply our patches and install it for the MXNet engine:
# every step is reprokit.engines.bytescheduler.install's (staging folder, swapped in only when the engine imports it
# patched; a failed step names itself).
set -euo pipefail
: "${INSTALL_DIR:?INSTALL_DIR is empty: refusing to install (check env_set in the os entry)}"
: "${FRAMEWORK_PYTHON:?FRAMEWORK_PYTHON is empty: custom.py of the package did not run}"
: "${CK_ENV_LIB_MXNET_PYTHON:?the MXNet engine is not resolved: install it with ck install package:lib-mxnet}"
exec env PYTHONPATH="$REPROKIT_SRC" "$FRAMEWORK_PYTHON" -m reprokit.engines.bytescheduler install

#! /bin/bash
# IWSLT15 en-vi as Sockeye's tutorials use it: every file from PACKAGE_URL (a folder URL; a mirror
# or the tests' loopback server with --env.PACKAGE_URL=...), checked that the sentence pairs line
# up, into $INSTALL_DIR/corpus. Staged: an earlier install survives a failure; CK registers nothing.
set -euo pipefail
: "${INSTALL_DIR:?INSTALL_DIR is empty: refusing to install (check env_set in the os entry)}"
: "${FRAMEWORK_PYTHON:?FRAMEWORK_PYTHON is empty: custom.py of the package did not run}"
PYTHONPATH="$REPROKIT_SRC" "$FRAMEWORK_PYTHON" -m reprokit.data.iwslt fetch --url "$PACKAGE_URL" --dest "$INSTALL_DIR"

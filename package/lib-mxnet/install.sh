#! /bin/bash
# Install stock MXNet with its pinned numpy into a prefix of its own.
# The prefix is built beside the target and swapped in only when it imports,
# so a failed install never damages an earlier one.
set -euo pipefail

: "${INSTALL_DIR:?INSTALL_DIR is empty: refusing to install (check the os entry's env_set)}"
: "${FRAMEWORK_PYTHON:?FRAMEWORK_PYTHON is empty: the package's customize.py did not run}"

prefix="$INSTALL_DIR/prefix"
staging="$INSTALL_DIR/prefix.partial"
rm -rf "$staging"
trap 'rm -rf "$staging"' EXIT

echo "Creating the engine prefix with $FRAMEWORK_PYTHON ..."
"$FRAMEWORK_PYTHON" -m venv "$staging"
"$staging/bin/python" -m pip install --disable-pip-version-check --no-input \
    "mxnet==${MXNET_VERSION}" "numpy==${NUMPY_VERSION}"
"$staging/bin/python" -c "import mxnet; print('MXNet', mxnet.__version__, 'imports from', mxnet.__path__[0])"

rm -rf "$prefix.old"
if [ -e "$prefix" ]; then mv "$prefix" "$prefix.old"; fi
mv "$staging" "$prefix"
rm -rf "$prefix.old"
trap - EXIT

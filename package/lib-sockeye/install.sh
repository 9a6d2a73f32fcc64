#! /bin/bash
# Install Sockeye 1.18 (the last MXNet-based line with --kvstore dist_sync) for the MXNet engine.
# Its packages go to $INSTALL_DIR/site-packages, built aside and swapped in once the engine
# imports them; a .pth file in the engine's prefix puts them on the engine's path.
# --no-deps: Sockeye pins mxnet-mkl 1.4.1 and the 'typing' backport, neither of which may replace
# the engine's MXNet 1.9.1 (verified to run Sockeye 1.18) nor shadow Python 3.11's typing.
set -euo pipefail

: "${INSTALL_DIR:?INSTALL_DIR is empty: refusing to install (check env_set in the os entry)}"
: "${CK_ENV_LIB_MXNET_PYTHON:?the MXNet engine is not resolved: install it with ck install package:lib-mxnet}"

PACKAGE_LABEL=lib-sockeye
INSTALL_FIX="fix that and run ck install package:lib-sockeye again (pip's index: pip config list)"
. "$REPROKIT_SRC/reprokit/ck/install_steps.sh"

engine="$CK_ENV_LIB_MXNET_PYTHON"
site="$INSTALL_DIR/site-packages"
staging="$INSTALL_DIR/site-packages.partial"
rm -rf "$staging"

step "pip install sockeye==${SOCKEYE_VERSION} and its pinned dependencies into the engine's path" "$staging"
echo "Installing Sockeye ${SOCKEYE_VERSION} for the engine $engine ..."
"$engine" -m pip install --disable-pip-version-check --no-input --no-deps --target "$staging" \
    "sockeye==${SOCKEYE_VERSION}" "sacrebleu==${SACREBLEU_VERSION}" "portalocker==${PORTALOCKER_VERSION}" \
    "PyYAML==${PYYAML_VERSION}"
step "importing Sockeye with the engine ($engine)"
PYTHONPATH="$staging" "$engine" -c "import sockeye.train, sockeye; print('Sockeye', sockeye.__version__, 'imports')"

step "swapping the new packages in ($site)"
rm -rf "$site.old"
if [ -e "$site" ]; then mv "$site" "$site.old"; fi
mv "$staging" "$site"
rm -rf "$site.old"
step "putting Sockeye on the engine's path" ""
engine_site=$("$engine" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$site" > "$engine_site/ck-lib-sockeye.pth"
"$engine" -c "import sockeye; print('Sockeye', sockeye.__version__, 'is on the engine path via', '$engine_site/ck-lib-sockeye.pth')"

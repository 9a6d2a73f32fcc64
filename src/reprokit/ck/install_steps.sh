# Sourced by the package install scripts written in bash (lib-mxnet, lib-sockeye): a failed install ends with our
# one line, handed to our `ck` command (core.errors.say_failure), in place of CK's "package installation failed!".
#   PACKAGE_LABEL=lib-mxnet; INSTALL_FIX="..."; . "$REPROKIT_SRC/reprokit/ck/install_steps.sh"
#   step "what runs next" [folder to remove if the script fails]
# Needs FRAMEWORK_PYTHON and REPROKIT_SRC (reprokit.ck.package.framework_setup puts them in the install's env).

step() {
    INSTALL_STEP="$1"
    INSTALL_CLEANUP="${2-${INSTALL_CLEANUP:-}}"  # an empty second word: nothing left to remove
}

_install_ended() {
    local code=$?
    if [ -n "${INSTALL_CLEANUP:-}" ]; then rm -rf "$INSTALL_CLEANUP"; fi
    if [ "$code" != 0 ]; then
        env PYTHONPATH="$REPROKIT_SRC" "$FRAMEWORK_PYTHON" -m reprokit.core.errors \
            "$PACKAGE_LABEL: error: ${INSTALL_STEP:-the install} failed (exit $code; its own message is above); $INSTALL_FIX"
    fi
    exit "$code"
}

trap _install_ended EXIT

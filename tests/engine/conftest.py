"""Engine tests run in the MXNet engine's interpreter: REPROKIT_MXNET_PYTHON when set, else the one installed
through `ck install package:lib-mxnet` by the session's CK (the `ck` fixture)."""
import json
import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def mxnet_python_from_ck(request):
    if os.environ.get("REPROKIT_MXNET_PYTHON"):
        return
    ck = request.getfixturevalue("ck")
    found = json.loads(ck("search", "env", "--tags=lib,mxnet", "--add_meta", "--out=json", check=True).stdout)["lst"]
    pythons = [e["meta"]["env"].get("CK_ENV_LIB_MXNET_PYTHON", "") for e in found]
    assert pythons and pythons[0], "no MXNet engine registered by the session's ck fixture"
    os.environ["REPROKIT_MXNET_PYTHON"] = pythons[0]


@pytest.fixture(scope="module")
def engine_python(mxnet_python_from_ck):
    """The MXNet engine's interpreter; a missing one fails the test rather than skipping it."""
    python = os.environ.get("REPROKIT_MXNET_PYTHON", "")
    if not python:
        pytest.fail("REPROKIT_MXNET_PYTHON is not set: it must name the Python interpreter of the MXNet engine "
                    "(e.g. <CK tools>/lib-mxnet-1.9.1-linux-64/prefix/bin/python)")
    return python

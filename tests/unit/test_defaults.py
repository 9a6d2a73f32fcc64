"""Each default has one source, the core's: the engine-side scripts (stdlib, MXNet and reprokit.wire only, so they
cannot import the core) require what the run always passes, and the constants they must keep are pinned to the
core's here."""
import ast
import json

from reprokit.core.paths import PROGRAM_DIR
from reprokit.data.imagenet import IMAGENET_TRAIN_IMAGES
from reprokit.engines.base import get_engine
from reprokit.engines.stock import FINISH_LINE
from reprokit.run.settings import PROFILE_NETWORK, resolve
from reprokit.vocabulary import PsVan
from reprokit.wire import role_van


def module_constants(path):
    tree = ast.parse(path.read_text())
    return {target.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant) for target in node.targets if isinstance(target, ast.Name)}


def arguments(path):
    """Each add_argument of the script: its first flag -> its keywords (names only, and 'default' if given)."""
    found = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            flag = node.args[0]
            name = flag.value if isinstance(flag, ast.Constant) else "--ps-van"  # role_van.VAN_OPTION
            found[name] = {k.arg for k in node.keywords}
    return found


def test_what_the_run_always_passes_has_no_default_on_the_engine_side():
    # train.py's --image-shape is required by every network but the emulated profile's (main() refuses its absence)
    optional = {"--image-shape"}
    for cmd_key, script in (("resnet", "train.py"), ("sockeye", "sockeye_run.py")):
        passed = [a for a in resolve(cmd_key, {}, "smoke").train_args(get_engine("stock")) if a.startswith("--")]
        declared = arguments(PROGRAM_DIR / script)
        with_default = [flag for flag in passed if "default" in declared[flag]]
        assert with_default == [], f"{script} has defaults of its own for {with_default}"
        assert all("required" in declared[flag] for flag in passed if flag in declared and flag not in optional)


def test_engine_side_constants_are_the_cores():
    assert module_constants(PROGRAM_DIR / "train.py")["IMAGENET_TRAIN_IMAGES"] == IMAGENET_TRAIN_IMAGES
    assert module_constants(PROGRAM_DIR / "train.py")["PROFILE_NETWORK"] == PROFILE_NETWORK
    assert role_van.DEFAULT_VAN == PsVan.ZMQ
    for script, printed in (("train.py", f'"{FINISH_LINE}%d sha256=%s params=%d"'),
                            ("sockeye_run.py", f'f"{FINISH_LINE}{{rank}} sha256=')):
        assert printed in (PROGRAM_DIR / script).read_text()  # the line engines.stock.FINISH_LINE waits for


def test_the_program_entrys_defaults_are_the_cores():
    """program:p3's run_vars show users the defaults; the core's resolve decides them. They must agree."""
    run_vars = json.loads((PROGRAM_DIR / ".cm" / "meta.json").read_text())["run_vars"]
    for cmd_key in ("resnet", "sockeye"):
        assert resolve(cmd_key, run_vars, "smoke") == resolve(cmd_key, {}, "smoke")

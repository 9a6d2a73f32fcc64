"""Sockeye's layer profile is Sockeye 1.18's own model: layer_profile.py, run in the engine's interpreter, builds
Sockeye's training model with sockeye_run.py's architecture and reads the arrays Module hands the kvstore, in key
order. The stored layer profile and every GPU's emulated Sockeye profile hold exactly those arrays."""
import ast
import json
import subprocess
from pathlib import Path

from reprokit.emulation.profile import arrays_of, collection
from reprokit.study.profiles import layer_profiles

PROGRAM = Path(__file__).resolve().parents[2] / "program" / "p3"

BUILT = """
import json, sys
sys.path.insert(0, sys.argv[1])
import layer_profile
entry = layer_profile.sockeye_profile()
print("PROFILE " + json.dumps({"layers": entry["layers"], "parameters": entry["parameters"]}))
"""


def constant(path, name):
    tree = ast.parse(path.read_text())
    return next(ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                and any(getattr(t, "id", "") == name for t in node.targets))


def test_the_sockeye_profile_holds_the_arrays_sockeye_builds_in_its_key_order(engine_python, tmp_path):
    # The profile is made with the architecture the real runs train.
    assert constant(PROGRAM / "layer_profile.py", "SOCKEYE_ARCHITECTURE") == constant(PROGRAM / "sockeye_run.py",
                                                                                      "ARCHITECTURE")
    proc = subprocess.run([engine_python, "-c", BUILT, str(PROGRAM)], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    built = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("PROFILE "))[8:])
    names = [p for layer in built["layers"] for p in layer["params"]]
    sizes = [n for layer in built["layers"] for n in layer["arrays"]]
    # Module's key order: the target embedding first (key 0, the highest priority), the output layer last.
    assert names[0] == "target_embed_weight" and names[-2:] == ["target_output_weight", "target_output_bias"]
    assert len(sizes) == 37 and sum(sizes) == built["parameters"] == 27_734_558
    stored = layer_profiles.profile("sockeye")
    assert [list(x.arrays) for x in stored.layers] == [x["arrays"] for x in built["layers"]]
    assert [x.name for x in stored.layers] == [x["name"] for x in built["layers"]]
    for name in ("p4000", "titan-x-maxwell"):
        assert arrays_of(collection(name).find("sockeye", "")) == sizes, name

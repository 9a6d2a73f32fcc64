"""A study refuses a wrong setting before its first run, in one line, and writes nothing to the store."""
import pytest

pytestmark = [pytest.mark.ck, pytest.mark.parallel]


@pytest.mark.parametrize("setting,message", [
    ("--env.BATCHSIZE=8", "unknown setting --env.BATCHSIZE (did you mean BATCH_SIZE?)"),
    ("--env.FOOBAR=1", "unknown setting --env.FOOBAR; program:p3's settings are BATCH_SIZE, "),
    ("--env." + "A" * 100_000 + "=1", "(100000 characters); program:p3's settings are"),
])
def test_an_unknown_run_setting_stops_the_sweep_before_its_first_run(bare_ck, tmp_path, setting, message):
    store = tmp_path / "store"
    proc = bare_ck("reproduce", "study:sysml19-p3", setting, f"--store={store}", timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1 and message in output, output[-2000:]
    assert len(output) < 2000 and "Traceback" not in output
    assert not store.exists()

"""The paper profile on a CPU-only engine: one warning, at the first measured speed, with the epoch's duration."""
import json
import os
import subprocess
import sys
from dataclasses import replace

from reprokit.engines.artifact.command import IMAGENET_TRAIN_IMAGES
from reprokit.engines.base import get_engine
from reprokit.run.forecast import EpochForecast, epoch_batches, forecast_message
from reprokit.run.settings import resolve
from reprokit.run.spec import RunData
from support.ckcli import REPO_ROOT
from support.runs import fake_plan, fake_spec


def paper_spec(cmd_key="resnet", **env):
    base = fake_spec(fake_plan("--speed", "12.5"))
    settings = resolve(cmd_key, {"PROFILE": "paper", **env}, default_profile="smoke")
    base.plan.extra_env = get_engine("stock").role_env(settings.variant, settings.p3_knobs)
    return replace(base, settings=settings, engine=replace(base.engine, name="mxnet-1.9.1-cpu"))


def test_full_imagenet_epoch_split_over_the_workers_at_the_first_speed():
    spec = paper_spec()
    batches = IMAGENET_TRAIN_IMAGES // (32 * 2)
    assert epoch_batches(spec) == batches == 20018
    message = forecast_message(spec, 12.5)
    # 20,018 batches x 32 images / 12.5 images/s = 51,246 s
    assert message == ("profile paper on a CPU-only engine (mxnet-1.9.1-cpu): one epoch is 20,018 batches of 32 "
                       "images per worker; at the first measured speed, 12.5 images/s per worker, it will take "
                       "about 14.2 h; for a short run choose --env.PROFILE=smoke")


def test_registered_data_and_explicit_batches_set_the_epoch_and_a_long_one_names_the_timeout():
    spec = replace(paper_spec(), data=RunData("imagenet-min", samples=6400))
    assert epoch_batches(spec) == 100
    assert epoch_batches(paper_spec(NUM_BATCHES="7")) == 7
    slow = forecast_message(paper_spec(), 1.5)
    assert "it will take about 4.9 days, longer than the run's timeout of 2.0 days (--env.RUN_TIMEOUT=SECONDS)" in slow
    corpus = replace(paper_spec("sockeye"), data=RunData("iwslt15", samples=133317))
    assert "one epoch is 2,083 batches of 32 sentences per worker" in forecast_message(corpus, 10.0)
    assert forecast_message(paper_spec("sockeye"), 10.0) == ""  # a generated corpus: its size is not known here


def test_only_paper_runs_on_a_cpu_engine_are_forecast():
    spec = paper_spec()
    assert EpochForecast.for_run(spec, sys.stdout) is not None
    assert EpochForecast.for_run(replace(spec, engine=replace(spec.engine, cuda=True)), sys.stdout) is None
    assert EpochForecast.for_run(fake_spec(fake_plan()), sys.stdout) is None  # smoke
    # Emulated compute: the pace is the profile's times k, known before the run; the CPU's speed says nothing.
    assert EpochForecast.for_run(paper_spec(COMPUTE="emulated"), sys.stdout) is None


def test_paper_run_on_cpu_warns_once_up_front_and_records_it(run_dir):
    spec = paper_spec()
    spec.save(run_dir)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")}
    proc = subprocess.run([sys.executable, "-m", "reprokit.run.command", str(run_dir / "p3-run.json")], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    warnings = [line for line in lines if line.startswith("p3: warning: profile paper on a CPU-only engine")]
    assert len(warnings) == 1  # both workers report three times: said once
    assert "12.5 images/s per worker, it will take about 14.2 h" in warnings[0]
    first_report = next(i for i, line in enumerate(lines) if "Speed:" in line)
    assert lines.index(warnings[0]) == first_report + 1  # right after the first measured speed, not at the end
    result = json.loads((run_dir / "p3-result.json").read_text())
    assert result["warnings"][0] == warnings[0].removeprefix("p3: warning: ")

import os
import re
import shutil
from collections import namedtuple

import pytest

from reprokit.ck.program import unknown_setting
from reprokit.cluster.hosts import parse
from reprokit.core.errors import UserError
from reprokit.core.values import LONGEST_SETTING, plain_setting, shell_hazard
from reprokit.engines.base import InstalledEngine, engine_switches, get_engine
from reprokit.run.settings import (
    ROLES_PER_CORE,
    absolute_outputs,
    check_roles_fit,
    default_profile,
    local_layout,
    resolve,
    with_local_outputs,
)
from reprokit.run.spec import RunData, build_spec

DEFAULTS = {"BATCH_SIZE": "", "NUM_EPOCHS": "1", "PROFILE": "", "IMAGE_SHAPE": "", "NUM_BATCHES": "",
            "NUM_WORKERS": "", "NUM_SERVERS": "", "PS_ROOT_PORT": "", "SEED": "42"}


STOCK = get_engine("stock")


def settings(**overrides):
    return resolve("resnet", {**DEFAULTS, **overrides}, default_profile="smoke")


def role_env(s):
    """What every role of a run of ``s`` gets on stock MXNet."""
    return STOCK.role_env(s.variant, s.p3_knobs)


def test_local_default_is_the_smoke_profile():
    s = settings()
    assert (s.profile, s.image_shape, s.num_batches, s.batch_size) == ("smoke", "3,32,32", 31, 32)
    assert (s.num_workers, s.num_servers, s.ps_root_port, s.worker_threads) == (None, None, None, 0)  # by target


def test_paper_profile_restores_the_papers_shape_and_full_epoch():
    s = settings(PROFILE="paper")
    assert (s.image_shape, s.num_batches, s.num_epochs, s.batch_size) == ("3,224,224", 0, 1, 32)


def test_explicit_values_beat_the_profile():
    s = settings(IMAGE_SHAPE="3, 64,64", NUM_BATCHES="5", NUM_WORKERS="3", NUM_SERVERS="2", PS_ROOT_PORT="9100")
    assert (s.image_shape, s.num_batches, s.num_workers, s.num_servers, s.ps_root_port) == ("3,64,64", 5, 3, 2, 9100)
    assert s.train_args(STOCK)[:2] == ["--network", "resnet50_v1"]


@pytest.mark.parametrize("key,value,expected", [
    ("BATCH_SIZE", "abc", "BATCH_SIZE must be a whole number, got 'abc'; fix it with --env.BATCH_SIZE=N"),
    ("BATCH_SIZE", "0", "BATCH_SIZE must be at least 1, got 0"),
    ("BATCH_SIZE", "-4", "BATCH_SIZE must be at least 1, got -4"),
    ("NUM_WORKERS", "0", "NUM_WORKERS must be at least 1"),
    ("NUM_SERVERS", "two", "NUM_SERVERS must be a whole number"),
    ("IMAGE_SHAPE", "224,224", "IMAGE_SHAPE must be C,H,W"),
    ("PROFILE", "fast", "unknown PROFILE 'fast'; valid ones: paper, smoke"),
    ("PS_ROOT_PORT", "80", "PS_ROOT_PORT must be at least 1024, got 80"),
    ("VARIANT", "fast", "unknown VARIANT 'fast'; valid ones: baseline, baseline-worker-update, p3"),
    ("P3_SLICE_SIZE", "-1", "P3_SLICE_SIZE must be at least 0, got -1"),
    ("P3_SLICE_SIZE", "1e5", "P3_SLICE_SIZE must be a whole number, got '1e5'"),
    ("P3_PRIORITY", "yes", "P3_PRIORITY must be 0 or 1, got 'yes'"),
])
def test_bad_values_are_refused_with_the_fix(key, value, expected):
    with pytest.raises(UserError) as err:
        settings(**{key: value})
    assert expected in str(err.value)
    assert "\n" not in str(err.value)


def test_p3_is_the_default_variant_and_switches_on_mxnets_own_p3_in_every_role():
    s = settings()
    assert (s.variant, s.p3_slice_size, s.p3_priority, s.p3_water_mark) == ("p3", 50_000, True, 10)
    assert role_env(s) == {"DMLC_PS_VAN_TYPE": "p3", "DMLC_PS_WATER_MARK": "10",
                            "MXNET_KVSTORE_SLICE_THRESHOLD": "50000"}
    args = s.train_args(STOCK)
    assert args[args.index("--variant") + 1] == "p3" and args[args.index("--ps-van") + 1] == "p3"
    assert args[args.index("--p3-priority") + 1] == "1"


def test_the_baselines_differ_only_in_where_the_optimizer_runs():
    stock = settings(VARIANT="baseline")
    assert role_env(stock) == {} and stock.train_args(STOCK)[stock.train_args(STOCK).index("--ps-van") + 1] == "zmq"
    worker = settings(VARIANT="baseline-worker-update")
    assert role_env(worker) == {"MXNET_UPDATE_ON_KVSTORE": "0"}
    assert worker.train_args(STOCK)[worker.train_args(STOCK).index("--ps-van") + 1] == "zmq"


@pytest.mark.parametrize("variant, expected", [
    ("p3", {"DMLC_PS_VAN_TYPE": "p3", "DMLC_PS_WATER_MARK": "10", "MXNET_KVSTORE_SLICE_THRESHOLD": "50000"}),
    ("baseline-worker-update", {"MXNET_UPDATE_ON_KVSTORE": "0"}),
    ("baseline", {}),
])
def test_every_role_of_a_run_on_stock_mxnet_gets_its_variants_switches(tmp_path, variant, expected):
    spec = build_spec(settings(VARIANT=variant), InstalledEngine("mxnet-1.9.1-cpu", "/usr/bin/python3", ""), RunData(),
                      run_dir=str(tmp_path))
    for role in spec.accepted().plan.roles:
        env = spec.accepted().plan.role_env(role)
        assert {k: env[k] for k in engine_switches() if k in env} == expected, role.name


def test_ablations_set_what_they_claim():
    slicing_only = settings(P3_PRIORITY="0")
    assert slicing_only.train_args(STOCK)[slicing_only.train_args(STOCK).index("--p3-priority") + 1] == "0"
    priority_only = settings(P3_SLICE_SIZE="0")
    # P3StoreDist loops forever on a threshold of 0: no slicing is a bound that no array reaches
    assert role_env(priority_only)["MXNET_KVSTORE_SLICE_THRESHOLD"] == str(2**31 - 1)
    assert role_env(settings(P3_WATER_MARK="0", P3_SLICE_SIZE="40000")) == {
        "DMLC_PS_VAN_TYPE": "p3", "DMLC_PS_WATER_MARK": "0", "MXNET_KVSTORE_SLICE_THRESHOLD": "40000"}
    with pytest.raises(UserError, match="P3_WATER_MARK must be a whole number"):
        settings(P3_WATER_MARK="ten")
    with pytest.raises(UserError, match="unknown VARIANT 'worker'; valid ones: baseline, baseline-worker-update, p3"):
        settings(VARIANT="worker")


def test_unknown_cmd_key_lists_the_valid_ones():
    with pytest.raises(UserError, match=r"unknown cmd_key 'alexnet'; valid ones: inception-v3, resnet, sockeye, vgg, vgg16"):
        resolve("alexnet", DEFAULTS, default_profile="smoke")


def test_inception_keeps_299_in_the_smoke_profile_with_a_lighter_run():
    s = resolve("inception-v3", DEFAULTS, default_profile="smoke")
    assert (s.image_shape, s.batch_size, s.num_batches, s.disp_batches) == ("3,299,299", 8, 7, 2)
    assert s.train_args(STOCK)[:2] == ["--network", "inceptionv3"]
    paper = resolve("inception-v3", {**DEFAULTS, "PROFILE": "paper"}, default_profile="smoke")
    assert (paper.image_shape, paper.batch_size, paper.num_batches) == ("3,299,299", 32, 0)


def test_inception_refuses_inputs_smaller_than_299_with_the_fix():
    with pytest.raises(UserError) as err:
        resolve("inception-v3", {**DEFAULTS, "IMAGE_SHAPE": "3,224,224"}, default_profile="smoke")
    assert str(err.value) == ("IMAGE_SHAPE 3,224,224 is too small for inception-v3, which needs at least 299x299; "
                              "fix it with --env.IMAGE_SHAPE=3,299,299 or leave it empty")
    assert resolve("inception-v3", {**DEFAULTS, "IMAGE_SHAPE": "3,320,320"}, "smoke").image_shape == "3,320,320"


def test_sockeye_runs_its_own_launcher_without_an_image_shape():
    s = resolve("sockeye", {**DEFAULTS, "OUTPUT_FILE": "/data/model"}, default_profile="smoke")
    assert (s.script, s.image_shape, s.batch_size, s.num_batches, s.disp_batches) == ("sockeye_run.py", "", 16, 16, 5)
    args = s.train_args(STOCK)
    assert "--image-shape" not in args and "--network" not in args
    assert args[args.index("--output") + 1] == "/data/model"
    assert resolve("sockeye", {**DEFAULTS, "PROFILE": "paper"}, "smoke").batch_size == 32
    with pytest.raises(UserError, match=r"IMAGE_SHAPE does not apply to sockeye"):
        resolve("sockeye", {**DEFAULTS, "IMAGE_SHAPE": "3,32,32"}, default_profile="smoke")


def test_an_explicit_batch_size_beats_every_profile_fill_in():
    for key in ("resnet", "inception-v3", "sockeye"):
        assert resolve(key, {**DEFAULTS, "BATCH_SIZE": "4"}, default_profile="smoke").batch_size == 4


def test_timeline_reaches_the_training_script():
    args = settings().train_args(STOCK)
    assert "--timeline" not in args
    args = settings(TIMELINE="1").train_args(STOCK)
    assert args[args.index("--timeline") + 1] == "timeline-worker-{rank}.json"


def test_default_profile_is_smoke_here_and_on_a_testbed_paper_on_a_cluster(tmp_path):
    (tmp_path / "testbed.json").write_text('{"name": "tb", "hosts": 2, "rate": null}\n')
    testbed = {"hosts": [{"host": "10.77.0.1", "interface": "eth0"}, {"host": "10.77.0.2", "interface": "eth0"}],
               "ssh_config": str(tmp_path / "ssh_config"), "known_hosts": str(tmp_path / "known_hosts")}
    assert default_profile(None) == "smoke"
    assert default_profile(testbed) == "smoke"
    assert default_profile(["chifflet-2", "chifflet-4"]) == "paper"
    assert default_profile({**testbed, "hosts": ["node1", "node2"]}) == "paper"  # reuses the ssh_config only
    assert default_profile({"nodefile": "$OAR_NODEFILE"}) == "paper"


# --- limits and output paths (checked before anything starts) ----------------------------------

@pytest.mark.parametrize("key, value, expected", [
    ("NUM_WORKERS", "1000000", "NUM_WORKERS must be at most 100000, got 1000000"),
    ("NUM_SERVERS", "1000000", "NUM_SERVERS must be at most 100000"),
    ("SEED", str(2**32), f"SEED must be at most {2**32 - 1}"),
    ("BATCH_SIZE", "10000000", "BATCH_SIZE must be at most 65536"),
    ("RUN_TIMEOUT", "99999999", "RUN_TIMEOUT must be at most 2592000"),
    ("WORKER_THREADS", "5000", "WORKER_THREADS must be at most 1024"),
    ("IMAGE_SHAPE", "3,100000,100000", "IMAGE_SHAPE must be C,H,W with whole numbers from 1 to 4096"),
])
def test_numbers_beyond_any_host_are_refused_naming_the_limit(key, value, expected):
    with pytest.raises(UserError, match=re.escape(expected)):
        settings(**{key: value})


def test_workers_and_servers_per_host_are_bounded_by_its_cores():
    check_roles_fit({"a": 8, "b": 1}, {"a": 2, "b": None})  # 4 per core fit; unknown cores: not checked here
    with pytest.raises(UserError, match=r"the layout puts 9 workers and servers on a, which has 2 core\(s\): "
                                        r"at most 8 fit \(4 per core\)"):
        check_roles_fit({"a": 9}, {"a": 2})
    cores = os.cpu_count()
    assert local_layout(settings(NUM_WORKERS=str(ROLES_PER_CORE * cores - 1))) == (ROLES_PER_CORE * cores - 1, 1)
    with pytest.raises(UserError, match=rf"NUM_WORKERS={ROLES_PER_CORE * cores} with NUM_SERVERS=1 puts"):
        local_layout(settings(NUM_WORKERS=str(ROLES_PER_CORE * cores)))


def test_a_thousand_node_cluster_validates_without_reaching_any_host():
    data = {"hosts": [f"node{i}" for i in range(1000)]}
    s = resolve("resnet", {"NUM_WORKERS": "4000", "SAVE_PARAMS": "/data/p.npz"}, "paper")
    spec = build_spec(s, InstalledEngine("mxnet-1.9.1-cpu", "/usr/bin/python3", ""), RunData(), parse(data))
    assert len(spec.plan.workers) == 4000 and len(spec.plan.servers) == 1000
    assert spec.plan.outputs == {"SAVE_PARAMS": "/data/p.npz"}  # each worker host checks it before the run starts


def test_output_paths_are_made_absolute_in_the_run_folder_and_checked_writable(tmp_path):
    s = with_local_outputs(settings(SAVE_PARAMS="p.npz", OUTPUT_FILE=str(tmp_path / "model")), str(tmp_path))
    assert (s.save_params, s.output_file) == (str(tmp_path / "p.npz"), str(tmp_path / "model"))
    assert [p.name for p in tmp_path.iterdir()] == []  # the write check leaves nothing
    for given, expected in [
        ("/nonexistent/dir/p.npz", "SAVE_PARAMS='/nonexistent/dir/p.npz': the folder /nonexistent/dir does not exist"),
        ("/sys/p.npz", "SAVE_PARAMS='/sys/p.npz': cannot write into /sys"),  # read-only even for root
        (str(tmp_path), f"SAVE_PARAMS={str(tmp_path)!r} is a folder, and the run writes a file there"),
    ]:
        with pytest.raises(UserError, match=re.escape(expected)):
            with_local_outputs(settings(SAVE_PARAMS=given), str(tmp_path))
    with pytest.raises(UserError, match="on a cluster the roles' run folders are removed"):
        absolute_outputs(settings(OUTPUT_FILE="model"))


# --- shell syntax (what stock CK writes into its scripts) ------------------------------------------

@pytest.mark.parametrize("value, meaning", [
    ("$(touch x)", "a $ (variable or command substitution)"),
    ("`touch x`", "a backtick (command substitution)"),
    ("1;touch${IFS}x", "a ; (a new command)"),
    ("1\ntouch x", "a line break (a new command)"),
    ('1"', "a double quote"),
    ("1'", "a single quote"),
    ("1\\", "a backslash"),
    ("1&", "an & (a background or new command)"),
    ("1|x", "a | (a pipe)"),
    ("a b", "a space (word splitting)"),
    ("*", "a wildcard"),
    ("~/x", "a ~ (home-folder expansion)"),
    ("é", "the character 'é'"),
])
def test_shell_syntax_is_named_by_its_first_character(value, meaning):
    assert shell_hazard(value).startswith(meaning)
    with pytest.raises(UserError, match=re.escape(f"SEED={value!r} holds {meaning}")):
        plain_setting("SEED", value, "why")


def test_plain_values_pass_and_quoted_scripts_allow_inner_spaces():
    for value in ("", "42", "3,224,224", "/data/run-1/p.npz", "numpy==1.23.5", "http://host:80/a%20b+c@d"):
        assert shell_hazard(value) is None
    assert shell_hazard("numpy==1.23.5 requests", spaces_quoted=True) is None
    assert shell_hazard(" leading", spaces_quoted=True) == "a space (word splitting)"  # CK quotes from the 2nd character
    with pytest.raises(UserError, match="setting name 'A;B' is not a name"):
        plain_setting("A;B", "1", "why")


def test_an_unknown_setting_is_named_with_the_likely_one_and_engine_variables_pass():
    known = ["BATCH_SIZE", "P3_SLICE_SIZE", "SEED", "VARIANT"]
    assert unknown_setting(["SEED", "BATCH_SZIE"], known) == (
        "unknown setting BATCH_SZIE (did you mean BATCH_SIZE?); the settings are in docs/reference/settings.md, "
        "'Run settings'")
    assert unknown_setting(["FOO"], known).startswith("unknown setting FOO; program:p3's settings are BATCH_SIZE, ")
    assert unknown_setting(["MXNET_ENGINE_TYPE", "OMP_WAIT_POLICY", "VARIANT"], known) is None


@pytest.mark.parametrize("engine", [InstalledEngine("mxnet-1.9.1-cpu", "/usr/bin/python3", ""),
                                    InstalledEngine("sysml19-p3@c647954", "/usr/bin/python3", "e1", build="p3",
                                                    tree="/opt/p3")])
def test_every_engine_refuses_a_set_smaller_than_a_batch_per_worker_before_any_role_starts(engine):
    """The check is in build_spec, which every engine's plan goes through: a cluster of 3 workers, batch 32."""
    data = {"hosts": ["a", "b", "c"]}
    s = resolve("resnet", {"NUM_WORKERS": "3", "BATCH_SIZE": "32"}, "smoke")
    small = RunData("imagenet-min", ["--data-train", "t.rec"], "t.rec", "u1", samples=80, unit="images", split=True)
    with pytest.raises(UserError, match=r"holds 80 images, 26 per worker, fewer than one batch of 32 per worker"):
        build_spec(s, engine, small, parse(data))
    enough = RunData("imagenet-min", ["--data-train", "t.rec"], "t.rec", "u1", samples=96, unit="images", split=True)
    assert build_spec(s, engine, enough, parse(data)).data.samples == 96


def test_an_output_path_is_refused_up_front_when_its_disk_is_too_full_or_its_name_too_long(tmp_path, monkeypatch):
    with pytest.raises(UserError, match=r"SAVE_PARAMS='.*'… \(\d+ characters\): the name x+… \(304 characters\) in .* is 304 bytes long, "
                                        r"more than the 255 .*; shorten the name"):
        with_local_outputs(settings(SAVE_PARAMS="x" * 300 + ".npz"), str(tmp_path))
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: usage(10 ** 9, 10 ** 9, 10 * 1024 * 1024))
    with pytest.raises(UserError, match=r"SAVE_PARAMS='.*p\.npz': only 10\.0 MB free on .*, 100\.0 MB needed .*; "
                                        r"free space on"):  # resnet's parameters take about 100 MB
        with_local_outputs(settings(SAVE_PARAMS="p.npz"), str(tmp_path))


def test_the_priority_ablation_is_p3s_alone():
    def priority_arg(**env):
        args = settings(**env).train_args(STOCK)
        return args[args.index("--p3-priority") + 1]

    assert priority_arg(VARIANT="p3", P3_PRIORITY="0") == "0"
    assert priority_arg(VARIANT="p3") == "1"
    assert priority_arg(VARIANT="baseline", P3_PRIORITY="0") == "1"  # the baseline keeps the trainer's priorities
    assert settings(VARIANT="baseline", P3_PRIORITY="0").p3_priority is True


def test_a_setting_longer_than_a_path_is_refused_before_stock_ck_echoes_it():
    plain_setting("DATA", "d" * LONGEST_SETTING, "why")
    with pytest.raises(UserError, match=r"DATA='dddd.*\(4097 characters\) is too long for a setting \(at most 4096"):
        plain_setting("DATA", "d" * (LONGEST_SETTING + 1), "why")

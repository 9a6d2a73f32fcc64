"""The bytescheduler variant's framework side (reprokit.engines.bytescheduler): its knobs, its roles' environment
and arguments, and a run whose scheduler was bypassed failing from its workers' lines."""
import pytest

from reprokit.core.errors import UserError
from reprokit.engines.base import engine_switches, get_engine
from reprokit.engines.bytescheduler import ByteSchedulerVariant
from reprokit.run.settings import resolve
from reprokit.vocabulary import Variant
from reprokit.wire import bytescheduler_line as LINE


def test_knobs_default_to_the_authors_and_apply_to_the_variant_only():
    settings = resolve("resnet", {"VARIANT": "bytescheduler"}, "smoke")
    assert (settings.bytescheduler_partition, settings.bytescheduler_credit) == (1_000_000, 4_000_000)
    stock = get_engine("stock")
    assert stock.role_env(settings.variant, settings.p3_knobs, settings.scheduler_knobs) == {
        "BYTESCHEDULER_PARTITION": "1000000", "BYTESCHEDULER_CREDIT": "4000000", "BYTESCHEDULER_CREDIT_TUNING": "0"}
    args = settings.train_args(stock)
    assert args[args.index("--scheduler") + 1] == "bytescheduler"
    assert args[args.index("--ps-van") + 1] == "zmq"
    other = resolve("resnet", {"VARIANT": "baseline", "BYTESCHEDULER_PARTITION": ""}, "smoke")
    assert other.scheduler_knobs is None and "--scheduler" not in other.train_args(stock)
    with pytest.raises(UserError, match="BYTESCHEDULER_PARTITION applies only to VARIANT=bytescheduler"):
        resolve("resnet", {"VARIANT": "p3", "BYTESCHEDULER_PARTITION": "7"}, "smoke")
    with pytest.raises(UserError, match="image models"):
        resolve("sockeye", {"VARIANT": "bytescheduler"}, "smoke")


def test_a_role_never_inherits_bytescheduler_s_switches():
    assert {"BYTESCHEDULER_CREDIT_TUNING", "BYTESCHEDULER_PARTITION", "BYTESCHEDULER_TIMELINE"} <= set(engine_switches())


def line(**values):
    return LINE.format_line(**{"rank": 0, "partition": 1000000, "credit": 4000000, "credit_tuning": 0,
                               "pushpulls": 12, "tasks": 12, "immediate": 0, "commit": "abc", **values})


def test_the_result_says_what_went_through_the_scheduler():
    field, failure = ByteSchedulerVariant.result_field([f"x\n{line()}\n", line(rank=1, immediate=1)])
    assert failure == "" and field == {"partition": 1000000, "credit": 4000000, "credit_tuning": False,
                                       "commit": "abc", "pushpulls": [12, 12], "tasks": [12, 12],
                                       "immediate": [False, True]}


@pytest.mark.parametrize("texts, reason", [
    ([line(), "no line here"], "worker#1 logged no 'bytescheduler:' line"),
    ([line(tasks=0), line(rank=1)], "worker#0: ByteScheduler's core received 0 of 12 pushpulls: the scheduler was "
                                    "bypassed"),
    ([line(pushpulls=0, tasks=0), line(rank=1)], "received 0 of 0 pushpulls"),
])
def test_a_worker_whose_gradients_bypassed_the_scheduler_fails_the_run(texts, reason):
    field, failure = ByteSchedulerVariant.result_field(texts)
    assert field is None and reason in failure


def test_the_line_round_trips():
    assert LINE.parse_line(line(commit="")) == {"rank": 0, "partition": 1000000, "credit": 4000000, "credit_tuning": 0,
                                                "pushpulls": 12, "tasks": 12, "immediate": 0, "commit": ""}
    assert LINE.parse_line("p3-comm: x=1") is None
    assert Variant.BYTESCHEDULER.value == "bytescheduler"

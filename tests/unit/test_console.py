"""What the console shows of a role's output (run/console.py through OutputSink): progress, errors and our own
lines; the log keeps every line."""
import io
from pathlib import Path

from reprokit.run import speedometer
from reprokit.run.launch import OutputSink
from reprokit.run.plan import Role

# A real worker's output: the first worker of `ck run program:p3 --cmd_key=sockeye` (smoke profile, Sockeye
# 1.18.106 on MXNet 1.9.1), its run folder and CK's tools folder shortened to /run and /ck-tools.
SOCKEYE_WORKER_LOG = Path(__file__).with_name("data") / "sockeye-smoke-worker.log"
WORKER = Role("worker", 0, "127.0.0.1")
PREFIX = "[127.0.0.1 worker#0] "


def pumped(tmp_path, text: str) -> tuple[OutputSink, list[str], str]:
    """``text`` as one worker's output through the sink: the sink, the console's lines, the worker's log."""
    console = io.StringIO()
    sink = OutputSink(console, tmp_path / "logs")
    sink.pump(WORKER, io.BytesIO(text.encode())).join(timeout=10)
    return sink, console.getvalue().splitlines(), (tmp_path / "logs" / WORKER.log_name).read_text()


def test_a_sockeye_worker_shows_its_progress_and_our_lines_while_its_log_keeps_every_line(tmp_path):
    recorded = SOCKEYE_WORKER_LOG.read_text()
    sink, console, log = pumped(tmp_path, recorded)
    assert log == recorded
    # Of its 95 lines (its argument namespace, configs, vocabularies, buckets, MXNet's notices, numpy's deprecation
    # warning, ...), the console shows 12: ours (ps-van, the Sockeye command, p3-comm, the checksum), training's
    # start, its 3 speed reports, its checkpoint (3 lines) and its end.
    lines = recorded.splitlines()
    assert len(lines) == 95
    assert console == [PREFIX + lines[number - 1] for number in (1, 2, 79, 83, 84, 85, 87, 88, 90, 93, 94, 95)]
    # The speed reports on the console are the log's, and the progress watch saw them.
    assert speedometer.parse_reports("\n".join(console)) == {
        "127.0.0.1 worker#0": speedometer.parse_reports(log)[""]}
    assert sink.progress.bound_s(WORKER.name) is not None


def test_errors_tracebacks_and_warnings_reach_the_console_and_the_failure_line(tmp_path):
    output = [
        "/x/numpy/lib/npyio.py:521: VisibleDeprecationWarning: Creating an ndarray from ragged nested sequences",
        "  arr = np.asanyarray(arr)",  # the warning's source line: hidden with it
        "[INFO:sockeye.utils] Arguments: Namespace(config=None)",
        "[12:00:00] ../src/executor/graph_executor.cc:1991: Subgraph backend MKLDNN is activated.",
    ]
    shown = [
        "[WARNING:sockeye.train] Sockeye's own warning",
        "[ERROR:root] Uncaught exception",
        "Traceback (most recent call last):",
        '  File "/run/sockeye_run.py", line 181, in <module>',
        "    role_exit.run(main)",
        "DeprecationWarning: a warning the filter turned into an error",
        "Traceback (most recent call last):",
        '  File "/x/mxnet/base.py", line 246, in check_call',
        "mxnet.base.MXNetError: Traceback (most recent call last):",
        "  [bt] (0) /x/libmxnet.so(+0x1234) [0x7f]",
        "  File \"../src/kvstore/kvstore_dist.h\", line 90",
        "MXNetError: Check failed: (num_servers) > (0) : no server",
    ]
    sink, console, log = pumped(tmp_path, "\n".join(output + shown) + "\n")
    assert log.splitlines() == output + shown
    assert console == [PREFIX + line for line in shown]
    assert sink.last_error(WORKER.name) == "MXNetError: Check failed: (num_servers) > (0) : no server"
    assert WORKER.name in sink.raised()

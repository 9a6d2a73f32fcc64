"""The fault suite: every test here is marked ``fault(CLASS)`` (the fault it injects: signal, link, bundle,
injection, settings, concurrent, message, preparation, hostile-input, disk). With REPROKIT_FAULT_TOTALS=FILE, each
case's outcome is appended to FILE as one JSON line for benchmarks/fault_totals.py, with the seconds from the fault
to the command's exit for the cases that record them (``record_property("fault_to_exit_s", SECONDS)``)."""
import json
import os

import pytest

from support.faults import FaultFailure


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    path = os.environ.get("REPROKIT_FAULT_TOTALS")
    if not path or (report.when != "call" and report.passed):  # setup/teardown count only when they fail
        return
    marker = item.get_closest_marker("fault")
    failure = call.excinfo.value if call.excinfo else None
    with open(path, "a") as out:
        out.write(json.dumps({
            "case": item.nodeid, "class": marker.args[0] if marker else "unmarked", "when": report.when,
            "passed": report.passed, "skipped": report.skipped,
            "outcome": failure.outcome if isinstance(failure, FaultFailure) else ("other" if report.failed else None),
            # the seconds from the fault to the command's exit, where the case measures it (record_property)
            "fault_to_exit_s": dict(item.user_properties).get("fault_to_exit_s") if report.when == "call" else None,
        }) + "\n")

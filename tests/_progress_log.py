"""A line per test as it starts and as it ends, appended to $WHEELOPS_PROGRESS_LOG.

Lines: `SECONDS\tstart\tNODEID` and `SECONDS\tOUTCOME\tNODEID\tDURATION`.

A pytest killed at a time limit writes no JUnit report and no summary; this log still
says which tests had failed so far and which were running when it was killed
(tools/progress_report.py reads it). Under pytest-xdist only the controlling process
writes (the workers' reports reach it as they happen), so one process owns the file.
"""

from __future__ import annotations

import os
import time

import pytest

_PATH = None if os.environ.get("PYTEST_XDIST_WORKER") else os.environ.get("WHEELOPS_PROGRESS_LOG")
_started: dict[str, float] = {}
_SESSION_START = time.monotonic()


def _write(line: str) -> None:
    """The line after the seconds since this process started: when each test started and
    ended, to see afterwards how the workers were kept busy."""
    if _PATH:
        with open(_PATH, "a") as log:
            log.write(f"{time.monotonic() - _SESSION_START:.1f}\t{line}\n")


def logstart(nodeid: str) -> None:
    _started[nodeid] = time.monotonic()
    _write(f"start\t{nodeid}")


def report(rep: pytest.TestReport) -> None:
    """Every failed phase, and the call's outcome (or the setup's, if the test was skipped
    or errored there) with the test's time so far."""
    if rep.when == "call" or rep.failed or (rep.when == "setup" and rep.skipped):
        seconds = time.monotonic() - _started.get(rep.nodeid, time.monotonic())
        outcome = "error" if rep.failed and rep.when != "call" else rep.outcome
        _write(f"{outcome}\t{rep.nodeid}\t{seconds:.1f}")

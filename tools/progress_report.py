"""What a pytest progress log (tests/_progress_log.py) says, also of a run that was killed:

    python tools/progress_report.py LOG [--slowest N]

prints the failures and errors so far, the tests that started and never ended (running
when the run was killed), and the slowest tests; exit status 1 if any failed or hung.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def read(path: Path) -> tuple[dict[str, tuple[str, float]], dict[str, float]]:
    """The tests that ended (outcome, duration) and those that started and never ended
    (the seconds into the run when they started)."""
    ended: dict[str, tuple[str, float]] = {}
    started: dict[str, float] = {}
    for line in path.read_text().splitlines():
        fields = line.split("\t")
        if len(fields) == 3 and fields[1] == "start":
            started[fields[2]] = float(fields[0])
        elif len(fields) == 4:
            _, outcome, nodeid, seconds = fields
            if ended.get(nodeid, ("",))[0] not in ("failed", "error"):
                ended[nodeid] = (outcome, float(seconds))
    return ended, {n: t for n, t in started.items() if n not in ended}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("--slowest", type=int, default=15)
    args = parser.parse_args(argv)
    ended, running = read(args.log)
    bad = {n: o for n, (o, _) in ended.items() if o in ("failed", "error")}
    counts = {o: sum(1 for v, _ in ended.values() if v == o) for o in ("passed", "skipped")}
    print(
        f"{args.log.name}: {counts['passed']} passed, {counts['skipped']} skipped, "
        f"{len(bad)} failed or errored, {len(running)} started and not ended"
    )
    for nodeid, outcome in bad.items():
        print(f"  {outcome.upper():7} {nodeid}")
    for nodeid, since in running.items():
        print(f"  RUNNING {nodeid} (started {since:.0f} s into the run)")
    slowest = sorted(ended.items(), key=lambda item: -item[1][1])[: args.slowest]
    print("slowest:")
    for nodeid, (outcome, seconds) in slowest:
        print(f"  {seconds:7.1f} s  {outcome:7} {nodeid}")
    return 1 if bad or running else 0


if __name__ == "__main__":
    sys.exit(main())

"""`python -m wheelops`: can this install serve this machine? Exit status 1 if not."""

from __future__ import annotations

import argparse

from wheelops import __version__
from wheelops._damage import damaged_install

try:
    from wheelops._compat import doctor
except Exception as err:  # the doctor's own module is damaged: name it, as import would
    damage = damaged_install(err)
    if damage is None:
        raise
    raise SystemExit(f"wheelops.DamagedInstallError: {damage}") from err


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m wheelops",
        description="Compare this wheelops build with this Python, torch, CUDA and GPUs; "
        "print the fix when they do not fit. Exit status: 0 usable, 1 cannot serve.",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    return doctor.main(__version__, as_json=args.json)


if __name__ == "__main__":
    raise SystemExit(main())

"""The installed files against the wheel's RECORD: which are missing, changed or unreadable.

pip and uv install a wheel without comparing its files with the hashes its RECORD lists,
and nothing stops a file from being changed later; this reads them back. It hashes every
file (tens of MB), so only the doctor and a failed import call it, never a working import.
"""

from __future__ import annotations

import base64
import csv
import hashlib
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FileDamage:
    path: str  # the file, absolute
    state: str  # "missing", "changed (sha256 differs from RECORD)", "unreadable (...)"

    def __str__(self) -> str:
        return f"{self.path} is {self.state}"


def record_of(package_dir: Path) -> Path | None:
    """The RECORD of the distribution that installed this package; None for a source tree."""
    for dist_info in sorted(package_dir.parent.glob("wheelops-*.dist-info")):
        return dist_info / "RECORD"
    return None


def require_modules(package_dir: Path) -> None:
    """Raise FileNotFoundError for a Python module RECORD lists that is gone. The op and
    module registries find their modules by listing the folder, so a deleted one would
    silently take its op away. Cheap (stat calls, no hashing): import calls it."""
    record = record_of(package_dir)
    if record is None or not record.is_file():
        return
    for row in csv.reader(record.read_text(errors="replace").splitlines()):
        if row and row[0].endswith(".py") and not (package_dir.parent / row[0]).exists():
            path = package_dir.parent / row[0]
            raise FileNotFoundError(2, f"{path} is missing", str(path))


def damaged_files(package_dir: Path) -> list[FileDamage] | None:
    """Every file RECORD lists with a hash that is not as the wheel had it; None where no
    RECORD exists (a source checkout, an editable build)."""
    record = record_of(package_dir)
    if record is None:
        return None
    try:
        rows = list(csv.reader(record.read_text().splitlines()))
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        state = "missing" if isinstance(err, FileNotFoundError) else f"unreadable ({err})"
        return [FileDamage(str(record), state)]
    damage = []
    for row in rows:
        if len(row) < 2 or not row[1].startswith("sha256="):
            continue  # RECORD itself, compiled bytecode: listed without a hash
        path = package_dir.parent / row[0]
        if row[0].endswith("/") or path.is_dir():
            continue  # a folder entry some tools write: nothing to hash
        state = _state(path, row[1].removeprefix("sha256="))
        if state:
            damage.append(FileDamage(str(path), state))
    return damage


def _state(path: Path, expected: str) -> str | None:
    try:
        digest = hashlib.sha256()
        with path.open("rb") as file:
            for block in iter(lambda: file.read(1 << 20), b""):
                digest.update(block)
    except FileNotFoundError:
        return "missing"
    except OSError as err:
        return f"unreadable ({err.strerror or err})"
    actual = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
    return None if actual == expected else "changed (its sha256 differs from the wheel's RECORD)"

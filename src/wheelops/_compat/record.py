"""The installed files against the wheel's RECORD (and the native libraries against the
hashes their build recorded): which are missing, changed or unreadable.

pip and uv install a wheel without comparing its files with the hashes its RECORD lists,
and nothing stops a file from being changed later; this reads them back. The doctor and
a failed import hash every file (tens of MB). Import hashes only the native libraries it
is about to load, because a library whose bytes changed can kill the process once mapped
(a sibling library in its place aborts it: every op registered twice); a library whose
file has not changed since it was last verified (same size, inode, mtime and ctime, which
no ordinary write can preserve) is not hashed again.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import os
import tempfile
import urllib.parse
from pathlib import Path
from typing import NamedTuple


# A NamedTuple: import loads this module and never builds one (only the doctor and a
# failed import do), and a frozen dataclass costs import ~0.4 ms to create.
class FileDamage(NamedTuple):
    """An installed file that is not as the wheel's RECORD lists it."""

    path: str  # the file, absolute
    state: str  # "missing", "changed (sha256 differs from RECORD)", "unreadable (...)"

    def __str__(self) -> str:
        return f"{self.path} is {self.state}"


def record_of(package_dir: Path) -> Path | None:
    """The RECORD of the distribution that installed this package; None for a source tree."""
    # A listing, not Path.glob: import reads it, and site-packages can hold thousands.
    try:
        names = sorted(os.listdir(package_dir.parent))
    except OSError:
        return None
    for name in names:
        if name.startswith("wheelops-") and name.endswith(".dist-info"):
            return package_dir.parent / name / "RECORD"
    return None


class PipBlock(NamedTuple):
    """A file of the install's .dist-info that pip cannot read, which decides the reinstall
    that works (Matrix.for_install)."""

    file: str  # "METADATA": pip lists no environment; "RECORD": pip cannot uninstall
    dist_info: str  # the .dist-info folder, absolute


def pip_block(package_dir: Path) -> PipBlock | None:
    """What in the install's .dist-info stops pip (checked by running pip on each damage:
    tests/test_damaged_install.py). pip reads every installed distribution's METADATA
    before any command, so one it cannot decode fails them all (a missing or empty one it
    skips); it reads RECORD to uninstall, so a missing or undecodable one fails
    --force-reinstall ("Cannot uninstall wheelops ..., RECORD file not found"). None: pip
    reads both, or a source tree. A read, no hashing: import calls it."""
    record = record_of(package_dir)
    if record is None:
        return None
    for name in ("METADATA", "RECORD"):  # METADATA's stops every command: it decides
        try:
            (record.parent / name).read_bytes().decode("utf-8")
        except FileNotFoundError:
            if name == "RECORD":
                return PipBlock(name, str(record.parent))
        except (OSError, UnicodeDecodeError):
            return PipBlock(name, str(record.parent))
    return None


def installed_version(package_dir: Path) -> str | None:
    """The version the installed distribution's METADATA names ("0.1.0+cu130"), whose local
    label names the wheel's variant; None for a source tree or an unreadable METADATA."""
    record = record_of(package_dir)
    if record is None:
        return None
    try:
        with (record.parent / "METADATA").open() as metadata:
            # The headers only: they end at the first empty line, before the README (80 KB).
            for line in metadata:
                if not line.strip():
                    break
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
    except (OSError, UnicodeDecodeError):
        pass
    return None


CHECKOUT_LABEL = "dev"  # a source checkout's local label: no wheel carries it
LIBRARY_PREFIX = "_ops_"  # the native libraries: _ops_cpu*.so, _ops_cuda<major>*.so


def has_libraries(package_dir: Path) -> bool:
    """Whether a native library is built in the package (an unbuilt checkout has none, and
    dev mode builds in its cache)."""
    try:
        names = os.listdir(package_dir)
    except OSError:
        return False
    return any(n.startswith(LIBRARY_PREFIX) and n.endswith(".so") for n in names)


def version(package_dir: Path, base: str) -> str:
    """The version users see: the installed distribution's (its METADATA's, "0.1.0+universal",
    as importlib.metadata reports it); `base` (_version.py's) where no METADATA can be read;
    `<base>+dev` in a source checkout (no dist-info, no library in the package), so that a
    report from a checkout never reads as the release's."""
    installed = installed_version(package_dir)
    if installed:
        return installed
    if record_of(package_dir) is None and not has_libraries(package_dir):
        return f"{base}+{CHECKOUT_LABEL}"
    return base


def installed_from(package_dir: Path) -> str | None:
    """The local wheel file the install came from, as its direct_url.json (PEP 610) names
    it; None for an install from an index, a source tree, or no such record."""
    record = record_of(package_dir)
    try:
        data = json.loads((record.parent / "direct_url.json").read_text()) if record else {}
    except (OSError, ValueError):
        return None
    url = data.get("url") if isinstance(data, dict) else None
    if not isinstance(url, str) or not url.startswith("file://") or not url.endswith(".whl"):
        return None
    return urllib.parse.unquote(urllib.parse.urlparse(url).path)


def require_modules(package_dir: Path) -> None:
    """Raise FileNotFoundError for a Python module RECORD lists that is gone. Import runs
    only some modules (the doctor's and others load later), so a deleted one would fail
    only at its first use. Cheap (stat calls, no hashing): import calls it."""
    record = record_of(package_dir)
    if record is None or not record.is_file():
        return
    for row in csv.reader(record.read_text(errors="replace").splitlines()):
        if row and row[0].endswith(".py") and not (package_dir.parent / row[0]).exists():
            path = package_dir.parent / row[0]
            raise FileNotFoundError(2, f"{path} is missing", str(path))


def damaged_files(
    package_dir: Path, library_sha256: dict[str, str] | None = None
) -> list[FileDamage] | None:
    """Every file RECORD lists with a hash that is not as the wheel had it. Where no RECORD
    exists (the package alone: a vendored copy, a Docker COPY of its folder; a source tree),
    every native library whose build recorded its sha256 (`library_sha256`, the build
    facts'), including those this import does not load; None where neither tells."""
    record = record_of(package_dir)
    if record is None:
        if not library_sha256:
            return None
        built = "the sha256 its build recorded"
        checked = (
            (package_dir / name, _state(package_dir / name, digest, built))
            for name, digest in sorted(library_sha256.items())
        )
        return [FileDamage(str(path), state) for path, state in checked if state]
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


def sha256_of(path: Path) -> hashlib._Hash:
    """The file's sha256, read in blocks (raises OSError). The build records each native
    library's with it (build facts' library_sha256, hex); RECORD lists urlsafe base64."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest


def _state(path: Path, expected: str, listed_in: str = "the wheel's RECORD") -> str | None:
    """None where the file's sha256 is `expected` (hex: 64 digits; else RECORD's base64)."""
    try:
        digest = sha256_of(path)
    except FileNotFoundError:
        return "missing"
    except OSError as err:
        return f"unreadable ({err.strerror or err})"
    hexadecimal = len(expected) == 64
    actual = (
        digest.hexdigest()
        if hexadecimal
        else base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
    )
    return None if actual == expected else f"changed (its sha256 differs from {listed_in})"


def library_damage(package_dir: Path, library: Path, built_sha256: str | None) -> str | None:
    """Why the library is not the file its build wrote ("changed (...)", "missing", "not
    listed in the wheel's RECORD"), or None: it matches. `built_sha256`: the build facts'
    hash of it, which needs no RECORD; without one (an older build), the wheel's RECORD
    tells, and with no readable RECORD either (a source tree) nothing does. Hashes the
    file unless it was verified, unchanged, before."""
    if built_sha256 is not None:
        digest, listed_in = built_sha256, "the sha256 its build recorded"
    else:
        record = record_of(package_dir)
        try:
            rows = list(csv.reader(record.read_text().splitlines())) if record else []
        except (OSError, UnicodeDecodeError, csv.Error):
            return None
        if not rows:
            return None
        relative = library.relative_to(package_dir.parent).as_posix()
        expected = next((r[1] for r in rows if len(r) > 1 and r[0] == relative), None)
        if expected is None or not expected.startswith("sha256="):
            return "not listed in the wheel's RECORD (not a file this wheel installed)"
        digest, listed_in = expected.removeprefix("sha256="), "the wheel's RECORD"
    stamp = _stamp(library)
    if stamp is not None and _verified().get(str(library)) == [*stamp, digest]:
        return None
    state = _state(library, digest, listed_in)
    if state is None and stamp is not None:
        _remember(str(library), [*stamp, digest])
    return state


def _stamp(path: Path) -> list[int] | None:
    try:
        s = path.stat()
    except OSError:
        return None
    return [s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns]


def _cache_file() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "wheelops" / "verified-libraries.json"


def _verified() -> dict[str, list]:
    try:
        data = json.loads(_cache_file().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _remember(path: str, entry: list) -> None:
    """Best effort: a read-only home only means hashing again next time."""
    cache = _cache_file()
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        verified = {k: v for k, v in _verified().items() if Path(k).exists()}
        verified[path] = entry
        with tempfile.NamedTemporaryFile("w", dir=cache.parent, delete=False) as file:
            json.dump(verified, file)
        os.replace(file.name, cache)
    except OSError:
        pass

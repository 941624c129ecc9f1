"""Copy a variant wheel without its local version label, for the PyPI upload.

    python -m build_tools.relabel dist/repaired/cu130/wheelops-0.1.0+cu130-*.whl dist/pypi

PyPI refuses local labels, and the default variant on PyPI should be the very
binary the cu130 index serves: only the version in the file name, the
.dist-info folder, METADATA and RECORD change.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import sys
import zipfile
from pathlib import Path

from build_tools.wheel_files import parse


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


def strip_label(source: Path, dest_dir: Path) -> Path:
    wheel = parse(source)
    if wheel.local_label is None:
        raise SystemExit(f"{source.name} has no local version label")
    version = wheel.version.split("+", 1)[0]
    old_info, new_info = wheel.dist_info, f"{wheel.project}-{version}.dist-info"
    dest_dir.mkdir(parents=True, exist_ok=True)
    target = dest_dir / source.name.replace(f"-{wheel.version}-", f"-{version}-", 1)
    records: list[str] = []
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.is_dir():  # auditwheel writes folder entries; a RECORD lists files only
                continue
            name = info.filename.replace(old_info, new_info, 1)
            if name == f"{new_info}/RECORD":
                continue
            data = src.read(info)
            if name == f"{new_info}/METADATA":
                data = data.replace(
                    f"\nVersion: {wheel.version}\n".encode(), f"\nVersion: {version}\n".encode()
                )
            dst.writestr(zipfile.ZipInfo(name, info.date_time), data, zipfile.ZIP_DEFLATED)
            records.append(f"{name},{_record_hash(data)},{len(data)}")
        records.append(f"{new_info}/RECORD,,")
        dst.writestr(f"{new_info}/RECORD", "\n".join(records) + "\n")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m build_tools.relabel", description=__doc__)
    parser.add_argument("wheel", type=Path)
    parser.add_argument("dest", type=Path)
    args = parser.parse_args(argv)
    print(strip_label(args.wheel, args.dest))
    return 0


if __name__ == "__main__":
    sys.exit(main())

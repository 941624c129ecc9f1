"""Copy a wheel under another version label: without one, for the PyPI upload; or cut
down from the universal wheel to one variant (slim).

    python -m build_tools.package.relabel \
        dist/repaired/universal/wheelops-0.1.0+universal-*.whl dist/pypi

PyPI refuses local labels, and PyPI's wheel should be the very binary the index serves:
only the version in the file name, the .dist-info folder, METADATA, the SBOM and RECORD
change.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

from build_tools.package import sbom
from build_tools.package.wheel_files import parse
from build_tools.plan.matrix import Variant


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


def strip_label(source: Path, dest_dir: Path) -> Path:
    wheel = parse(source)
    if wheel.local_label is None:
        raise SystemExit(f"{source.name} has no local version label")
    return _rewrite(source, dest_dir, wheel.version.split("+", 1)[0], lambda name, data: data)


def _is_sbom(name: str) -> bool:
    return name.endswith(f".dist-info/sboms/{sbom.SBOM_FILE}")


def slim(universal: Path, variant: Variant, dest_dir: Path) -> Path:
    """The universal wheel cut down to one variant: its CPU library and the CUDA library of
    the variant's CUDA major (none for cpu), labelled +<variant>, with build facts that say
    so. For cu130 these are the very binaries the cu130 build makes (the same toolkit and
    arch list); for a CUDA 12 variant, the universal wheel's CUDA 12.4 library stands in for
    the one its image builds (its facts still say 12.4), which serves the same torches."""
    major = variant.cuda_major_minor[0] if variant.cuda_major_minor else None
    facts_name = "wheelops/_build_info.json"
    with zipfile.ZipFile(universal) as archive:
        facts = json.loads(archive.read(facts_name))
    kept = [
        lib for lib in facts["cuda_libraries"] if lib["cuda_version"].split(".")[0] == str(major)
    ]
    if major is not None and not kept:
        raise SystemExit(f"{universal.name} has no CUDA {major} library for {variant.name}")
    dropped = {f"wheelops/{lib['file']}" for lib in facts["cuda_libraries"]} - {
        f"wheelops/{lib['file']}" for lib in kept
    }
    facts = {**facts, "built_as": variant.name, "cuda_libraries": kept}

    def transform(name: str, data: bytes) -> bytes | None:
        if name in dropped:
            return None
        if name == facts_name:
            return (json.dumps(facts, indent=2, sort_keys=True) + "\n").encode()
        if _is_sbom(name):  # _rewrite relabels it; here its other libraries go
            files = {name.removeprefix("wheelops/") for name in dropped}
            return json.dumps(sbom.relabel(json.loads(data), version, files), indent=1).encode()
        return data

    version = parse(universal).version.split("+", 1)[0] + f"+{variant.name}"
    return _rewrite(universal, dest_dir, version, transform)


def _rewrite(
    source: Path, dest_dir: Path, version: str, transform: Callable[[str, bytes], bytes | None]
) -> Path:
    """A copy of the wheel as `version` (file name, .dist-info, METADATA, RECORD), each file
    through `transform(name, data)` (None drops it)."""
    wheel = parse(source)
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
            data = transform(name, src.read(info))
            if data is None:
                continue
            if _is_sbom(name):  # the same build under its new version
                data = json.dumps(sbom.relabel(json.loads(data), version, set()), indent=1).encode()
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
    parser = argparse.ArgumentParser(
        prog="python -m build_tools.package.relabel", description=__doc__
    )
    parser.add_argument("wheel", type=Path)
    parser.add_argument("dest", type=Path)
    args = parser.parse_args(argv)
    print(strip_label(args.wheel, args.dest))
    return 0


if __name__ == "__main__":
    sys.exit(main())

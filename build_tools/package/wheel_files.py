"""What a wheel file says about itself: name, version, local label, Requires-Python, and
what its native libraries weigh (the build's size table)."""

from __future__ import annotations

import email.parser
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class WheelFile:
    path: Path
    project: str  # normalized, as in the file name ("wheelops")
    version: str  # "0.1.0+cu130"
    tags: str  # "cp310-abi3-manylinux_2_28_x86_64"

    @property
    def local_label(self) -> str | None:
        return self.version.split("+", 1)[1] if "+" in self.version else None

    @property
    def dist_info(self) -> str:
        return f"{self.project}-{self.version}.dist-info"

    def metadata_bytes(self) -> bytes:
        with zipfile.ZipFile(self.path) as archive:
            return archive.read(f"{self.dist_info}/METADATA")

    def requires_python(self) -> str | None:
        message = email.parser.BytesParser().parsebytes(self.metadata_bytes(), headersonly=True)
        return message.get("Requires-Python")


def parse(path: Path) -> WheelFile:
    parts = path.name.removesuffix(".whl").split("-")
    if not path.name.endswith(".whl") or len(parts) not in (5, 6):
        raise ValueError(f"{path.name} is not a wheel file name")
    return WheelFile(path, parts[0].lower().replace("_", "-"), parts[1], "-".join(parts[-3:]))


BUILD_INFO = "wheelops/_build_info.json"


def size_table(path: Path) -> str:
    """Each native library of the wheel: what it holds, its size installed and in the wheel
    (compressed), and the wheel's own size; MB = 10**6 bytes, as PyPI counts them."""
    with zipfile.ZipFile(path) as archive:
        facts = json.loads(archive.read(BUILD_INFO))
        cuda = {f"wheelops/{lib['file']}": lib for lib in facts["cuda_libraries"]}
        rows = ["| library | device code | size | in the wheel |", "|---|---|---|---|"]
        for info in sorted(archive.infolist(), key=lambda i: i.filename):
            if not info.filename.endswith(".so"):
                continue
            lib = cuda.get(info.filename)
            code = (
                f"CUDA {lib['cuda_version']}: SASS {', '.join(lib['sass_archs'])}; "
                f"PTX {', '.join(lib['ptx_archs']) or 'none'}"
                if lib
                else "-"
            )
            rows.append(
                f"| {info.filename} | {code} | {info.file_size / 1e6:.2f} MB "
                f"| {info.compress_size / 1e6:.2f} MB |"
            )
    rows.append(f"| {path.name} (the wheel) | | | {path.stat().st_size / 1e6:.2f} MB |")
    return "\n".join(rows)


def built_problem(path: Path, label: str, platform: str, cuda_wanted: list[str]) -> str | None:
    """What is wrong with a freshly built wheel, or None: it must be a cp310-abi3 wheel for
    `platform` labelled +`label`, holding CUDA libraries of exactly `cuda_wanted`, in order."""
    if f"+{label}-cp310-abi3-" not in path.name or not path.name.endswith(f"_{platform}.whl"):
        return f"{path.name} is not a cp310-abi3 {platform} wheel labelled +{label}"
    with zipfile.ZipFile(path) as archive:
        facts = json.loads(archive.read(BUILD_INFO))
    built = [lib["cuda_version"] for lib in facts["cuda_libraries"]]
    if built != [cuda for cuda in cuda_wanted if cuda]:
        return f"{path.name} holds CUDA libraries {built}, not {cuda_wanted}"
    return None


def libraries_said(path: Path) -> str:
    """The CUDA libraries of a wheel in a few words: "CUDA 13.0 (9.0;10.0)", or CPU only."""
    with zipfile.ZipFile(path) as archive:
        facts = json.loads(archive.read(BUILD_INFO))
    libraries = [
        f"CUDA {lib['cuda_version']} ({lib['arch_list']})" for lib in facts["cuda_libraries"]
    ]
    return ", ".join(libraries) or "CPU only"

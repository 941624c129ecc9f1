"""What a wheel file says about itself: name, version, local label, Requires-Python."""

from __future__ import annotations

import email.parser
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

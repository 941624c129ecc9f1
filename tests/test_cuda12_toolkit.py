"""The CUDA 12 toolkit provider (build_tools/plan/cuda12_toolkit.py): pins, the .deb reader,
and the errors a failed fetch gives. The real fetch runs in the universal build."""

from __future__ import annotations

import io
import platform
import re
import tarfile
from pathlib import Path

import pytest
from _loopback import served

from build_tools.plan import cuda12_toolkit
from build_tools.plan.cuda_toolkit import ToolkitError

x86_64_only = pytest.mark.skipif(
    platform.machine() != "x86_64", reason="the CUDA 12 toolkit is pinned for x86_64 only"
)


def test_every_file_is_pinned_by_version_and_sha256():
    for pin in (*cuda12_toolkit.DEBS, *cuda12_toolkit.WHEELS):
        assert re.fullmatch(r"[0-9a-f]{64}", pin.sha256), pin
        assert pin.size > 0 and pin.version in pin.location, pin
    assert {p.name for p in cuda12_toolkit.DEBS} >= {"nvidia-cuda-toolkit", "libcudart12"}


def _deb(members: dict[str, bytes]) -> bytes:
    """A Debian package: an ar archive of debian-binary, control.tar.xz and data.tar.xz."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:xz") as tar:
        for name, content in members.items():
            info = tarfile.TarInfo(f"./{name}")
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    out = b"!<arch>\n"
    for name, blob in [
        ("debian-binary", b"2.0\n"),
        ("control.tar.xz", b""),
        ("data.tar.xz", data.getvalue()),
    ]:
        out += f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(blob):<10}`\n".encode() + blob
        out += b"\n" if len(blob) % 2 else b""
    return out


def test_the_deb_reader_unpacks_the_data_member(tmp_path):
    deb = tmp_path / "x.deb"
    deb.write_bytes(_deb({"usr/bin/nvcc": b"ELF", "usr/include/cuda.h": b"#pragma once\n"}))
    with cuda12_toolkit.deb_data(deb) as data:
        assert sorted(data.getnames()) == ["./usr/bin/nvcc", "./usr/include/cuda.h"]
    (tmp_path / "not.deb").write_bytes(b"garbage")
    with pytest.raises(ToolkitError, match="is not a Debian package"):
        cuda12_toolkit.deb_data(tmp_path / "not.deb")


@x86_64_only
def test_an_unreachable_archive_names_the_package(tmp_path, monkeypatch):
    monkeypatch.setenv("WHEELOPS_TOOLKIT_CACHE", str(tmp_path))
    monkeypatch.setattr(cuda12_toolkit, "DEBIAN_ARCHIVE", "http://127.0.0.1:9/debian")
    with pytest.raises(ToolkitError) as refused:
        cuda12_toolkit.provide()
    message = str(refused.value)
    assert (
        "could not fetch nvidia-cuda-toolkit 12.4.131~12.4.1-2 from http://127.0.0.1:9" in message
    )
    assert "WHEELOPS_DEBIAN_MIRROR" in message


@x86_64_only
def test_a_file_that_is_not_the_pinned_one_is_refused(tmp_path, monkeypatch):
    pin = cuda12_toolkit.DEBS[0]
    mirror = tmp_path / "mirror"
    (mirror / Path(pin.location).parent).mkdir(parents=True)
    (mirror / pin.location).write_bytes(b"not the toolkit")
    monkeypatch.setenv("WHEELOPS_TOOLKIT_CACHE", str(tmp_path / "cache"))
    with served(mirror) as url:
        monkeypatch.setattr(cuda12_toolkit, "DEBIAN_ARCHIVE", url)
        with pytest.raises(
            ToolkitError, match=f"is not the pinned {pin.name} {re.escape(pin.version)}"
        ):
            cuda12_toolkit.provide()

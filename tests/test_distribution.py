"""The distribution tools: the PEP 503 index, the PyPI relabel, torch selection per test
cell, the version label, the refusal of CUDA 12 builds outside their image, and the
glibc floor of the built libraries."""

from __future__ import annotations

import base64
import hashlib
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from _checkout import REPO
from _loopback import served

import wheelops
from build_tools.package import index, relabel
from build_tools.package.wheel_files import parse, size_table
from build_tools.plan import build_env, installer, torch_install, version
from build_tools.plan import matrix as build_matrix

TAGS = "cp310-abi3-manylinux_2_28_x86_64"


def make_wheel(folder: Path, wheel_version: str, requires: tuple[str, ...] = ()) -> Path:
    """A small but valid wheel of wheelops at `wheel_version`."""
    info = f"wheelops-{wheel_version}.dist-info"
    files = {
        "wheelops/__init__.py": b"VALUE = 42\n",
        f"{info}/METADATA": (
            f"Metadata-Version: 2.1\nName: wheelops\nVersion: {wheel_version}\n"
            "Requires-Python: >=3.10\n" + "".join(f"Requires-Dist: {r}\n" for r in requires) + "\n"
        ).encode(),
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {TAGS}\n".encode(),
    }
    path = folder / f"wheelops-{wheel_version}-{TAGS}.whl"
    with zipfile.ZipFile(path, "w") as archive:
        records = []
        for name, data in files.items():
            archive.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            records.append(f"{name},sha256={digest.decode()},{len(data)}")
        archive.writestr(f"{info}/RECORD", "\n".join([*records, f"{info}/RECORD,,"]) + "\n")
    return path


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.anchors: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.anchors.append(dict(attrs))


def _anchors(page: Path) -> list[dict[str, str | None]]:
    parser = _Links()
    parser.feed(page.read_text())
    return parser.anchors


def test_index_is_laid_out_like_pytorchs(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    cu130 = make_wheel(wheels, "0.1.0+cu130")
    make_wheel(wheels, "0.1.0+cpu")
    listing = index.generate(index.collect([wheels]), tmp_path / "site")
    assert listing == {"cpu": [f"wheelops-0.1.0+cpu-{TAGS}.whl"], "cu130": [cu130.name]}
    root = tmp_path / "site" / "whl"
    assert [a["href"] for a in _anchors(root / "index.html")] == ["cpu/", "cu130/"]
    assert [a["href"] for a in _anchors(root / "cu130" / "index.html")] == ["wheelops/"]
    (link,) = _anchors(root / "cu130" / "wheelops" / "index.html")
    sha = hashlib.sha256(cu130.read_bytes()).hexdigest()
    assert link["href"] == f"{cu130.name}#sha256={sha}"
    assert link["data-requires-python"] == ">=3.10"  # the page escapes it as &gt;=3.10
    assert "&gt;=3.10" in (root / "cu130" / "wheelops" / "index.html").read_text()
    metadata = root / "cu130" / "wheelops" / f"{cu130.name}.metadata"
    meta_sha = hashlib.sha256(metadata.read_bytes()).hexdigest()
    assert link["data-core-metadata"] == f"sha256={meta_sha}"
    assert (root / "cu130" / "wheelops" / cu130.name).read_bytes() == cu130.read_bytes()


def test_index_refuses_wheels_without_a_variant_label(tmp_path):
    make_wheel(tmp_path, "0.1.0")
    with pytest.raises(SystemExit, match="no variant label"):
        index.collect([tmp_path])


def test_pip_resolves_from_the_served_index(tmp_path):
    """pip itself, against the index on loopback: PEP 503 pages, hashes, metadata."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "0.1.0+cu130")
    make_wheel(wheels, "0.1.0+cpu")
    index.generate(index.collect([wheels]), tmp_path / "site")
    with served(tmp_path / "site") as url:
        done = subprocess.run(
            [
                *(sys.executable, "-m", "pip", "download", "--isolated", "--no-deps"),
                *("--only-binary=:all:", "--platform=manylinux_2_28_x86_64"),
                *("--python-version=3.10", "--index-url", f"{url}/whl/cu130"),
                *("-d", str(tmp_path / "got"), "wheelops"),
            ],
            capture_output=True,
            text=True,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    assert [p.name for p in (tmp_path / "got").iterdir()] == [f"wheelops-0.1.0+cu130-{TAGS}.whl"]


def test_relabel_keeps_the_binary_and_fixes_the_metadata(tmp_path):
    source = make_wheel(tmp_path, "0.1.0+cu130")
    target = relabel.strip_label(source, tmp_path / "pypi")
    assert target.name == f"wheelops-0.1.0-{TAGS}.whl"
    wheel = parse(target)
    assert wheel.version == "0.1.0" and b"\nVersion: 0.1.0\n" in wheel.metadata_bytes()
    with zipfile.ZipFile(target) as archive, zipfile.ZipFile(source) as original:
        assert archive.read("wheelops/__init__.py") == original.read("wheelops/__init__.py")
        names = set(archive.namelist())
        assert not any("+cu130" in n for n in names)
        for line in archive.read("wheelops-0.1.0.dist-info/RECORD").decode().splitlines():
            name, digest, size = line.split(",")
            if name.endswith("RECORD"):
                continue
            data = archive.read(name)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            assert digest == f"sha256={expected.decode()}" and int(size) == len(data)


def test_regression_relabel_lists_no_folders_in_record(tmp_path):
    """auditwheel's repaired wheels hold folder entries; relabel once listed each in RECORD
    with the hash of nothing, and every install from PyPI then had "damaged" folders."""
    source = make_wheel(tmp_path, "0.1.0+universal")
    with zipfile.ZipFile(source, "a") as archive:
        archive.writestr(zipfile.ZipInfo("wheelops/ops/"), b"")
    target = relabel.strip_label(source, tmp_path / "pypi")
    with zipfile.ZipFile(target) as archive:
        assert not [n for n in archive.namelist() if n.endswith("/")]
        record = archive.read("wheelops-0.1.0.dist-info/RECORD").decode()
    assert not [line for line in record.splitlines() if line.split(",")[0].endswith("/")]


def test_relabel_refuses_a_wheel_without_a_label(tmp_path):
    with pytest.raises(SystemExit, match="no local version label"):
        relabel.strip_label(make_wheel(tmp_path, "0.1.0"), tmp_path / "out")


@pytest.mark.parametrize(
    ("variant", "torch", "reachable", "requirement", "index_url", "build"),
    [
        ("cu130", "2.14.1", True, "torch==2.14.1", "https://x.org/whl/cu130", "cu130"),
        ("cu130", "2.13.0+cpu", True, "torch==2.13.0", "https://x.org/whl/cpu", "cpu"),
        ("cpu", "2.13.0", True, "torch==2.13.0", "https://x.org/whl/cpu", "cpu"),
        # Without PyTorch's index: PyPI names CPU builds by label, CUDA builds by nothing.
        ("cpu", "2.13.0", False, "torch==2.13.0+cpu", None, "cpu"),
        ("cu130", "2.14.1", False, "torch==2.14.1", None, "cu130"),
    ],
)
def test_torch_install_plan(monkeypatch, variant, torch, reachable, requirement, index_url, build):
    monkeypatch.setattr(torch_install, "reachable", lambda url: reachable)
    plan = torch_install.plan(variant, torch, "https://x.org/whl")
    assert (plan.requirement, plan.index_url, plan.build) == (requirement, index_url, build)


@pytest.mark.parametrize(
    ("build", "requirement", "found", "problem"),
    [
        ("cu130", "torch==2.14.1", ("2.14.1+cu130", "13.0"), None),
        ("cu130", "torch==2.15.0", ("2.15.0", "13.2"), None),  # a newer 13.x runtime serves
        ("cu130", "torch==2.10.0", ("2.10.0", "12.8"), "CUDA 13.0 \\(cu130\\), got torch"),
        ("cu130", "torch==2.13.0+cpu", ("2.13.0+cpu", None), "got the CPU-only torch"),
        ("cpu", "torch==2.13.0+cpu", ("2.13.0+cpu", None), None),
        ("cpu", "torch==2.13.0", ("2.13.0", "13.0"), "wanted a CPU-only torch"),
        ("cpu", "torch==2.13.0", ("2.14.1+cpu", None), "wanted torch 2.13.0, got 2.14.1"),
    ],
)
def test_torch_install_verify(build, requirement, found, problem):
    result = torch_install.verify(torch_install.TorchInstall(requirement, None, build), *found)
    if problem is None:
        assert result is None
    else:
        assert re.search(problem, result or "")


def test_installer_gives_uv_the_find_links_pip_is_configured_with(tmp_path, monkeypatch):
    # uv reads no pip configuration: a torch kept on disk (a +cpu build PyPI lacks) must
    # still be found; the newest torch's install reads none of it (pip_config=False).
    config = tmp_path / "pip.conf"
    config.write_text("[global]\nfind-links = /a/wheels /b/wheels\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    monkeypatch.setenv("PIP_FIND_LINKS", "/a/wheels")
    python, wanted = sys.executable, ["torch==2.13.0+cpu"]
    links = ["--find-links", "/a/wheels", "--find-links", "/b/wheels"]
    uv_pip = ["/u/uv", "pip", "install", "--python", python, "--no-cache"]
    assert installer.command(python, wanted, "/u/uv", pip_config=True) == [*uv_pip, *links, *wanted]
    assert installer.command(python, wanted, "/u/uv", pip_config=False) == [*uv_pip, *wanted]
    pip = [python, "-m", "pip", "install", *wanted]
    assert installer.command(python, wanted, None, pip_config=True) == pip


def test_newest_torch_is_pypis_latest_release(tmp_path, monkeypatch):
    # matrix.json's "newest": PyPI's JSON API names its latest release (no pre-release).
    page = tmp_path / "torch.json"
    page.write_text(json.dumps({"info": {"version": "2.15.0"}, "releases": {"2.16.0rc1": []}}))
    assert torch_install.newest_release.__wrapped__(page.as_uri()) == "2.15.0"
    page.write_text(json.dumps({"info": {}}))
    with pytest.raises(SystemExit, match=r"cannot read .*torch\.json"):
        torch_install.newest_release.__wrapped__(page.as_uri())
    monkeypatch.setattr(torch_install, "newest_release", lambda: "2.15.0")
    assert torch_install.resolve(torch_install.NEWEST) == "2.15.0"
    assert torch_install.resolve("2.13.0+cpu") == "2.13.0+cpu"


def test_version_label_is_the_variant(monkeypatch):
    monkeypatch.delenv("WHEELOPS_VARIANT", raising=False)
    base = version.base_version()
    assert version.wheel_version() == base
    monkeypatch.setenv("WHEELOPS_VARIANT", "cu130")
    assert version.wheel_version() == f"{base}+cu130"
    monkeypatch.setenv("WHEELOPS_VARIANT", "cu 130!")
    with pytest.raises(SystemExit, match="not a variant name"):
        version.wheel_version()


def test_cuda_12_builds_are_refused_outside_their_image(monkeypatch):
    monkeypatch.delenv(build_env.IMAGE_VARIANT_ENV, raising=False)
    monkeypatch.setattr(installer, "install", lambda *a: pytest.fail("must refuse before pip"))
    image = build_matrix.load().image("cu126", build_matrix.this_platform())
    with pytest.raises(SystemExit) as refused:
        build_env.prepare("cu126")
    message = str(refused.value)
    assert "CUDA 12.6.3 toolkit, which comes only from its build image" in message
    fix = f"docker run --rm -v $PWD:/src -w /src {image} python -m nox -s build -- cu126"
    assert fix in message
    with pytest.raises(
        SystemExit, match="unknown variant 'cu999': the matrix has cpu, cu124, cu126"
    ):
        build_env.prepare("cu999")


def test_size_table_lists_each_library(tmp_path):
    """The build's size table: each library, its device code, its size on disk and in the
    wheel (a compressible library shrinks there), and the wheel's size."""
    lib = {"file": "_ops_cuda13.abi3.so", "cuda_version": "13.0", "sass_archs": ["8.0", "9.0"]}
    facts = {"cpu_library": "_ops_cpu.abi3.so", "cuda_libraries": [{**lib, "ptx_archs": []}]}
    wheel = tmp_path / f"wheelops-0.1.0-{TAGS}.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("wheelops/_build_info.json", json.dumps(facts))
        archive.writestr("wheelops/_ops_cpu.abi3.so", bytes(3_000_000))
        archive.writestr("wheelops/_ops_cuda13.abi3.so", os.urandom(2_000_000))
    rows = size_table(wheel).splitlines()
    assert rows[2] == "| wheelops/_ops_cpu.abi3.so | - | 3.00 MB | 0.00 MB |"
    assert rows[3].startswith(
        "| wheelops/_ops_cuda13.abi3.so | CUDA 13.0: SASS 8.0, 9.0; PTX none | 2.00 MB | 2.00 MB"
    )
    assert rows[4] == f"| {wheel.name} (the wheel) | | | {wheel.stat().st_size / 1e6:.2f} MB |"
    assert len(rows) == 5


def test_built_libraries_need_nothing_newer_than_glibc_2_28():
    """The manylinux_2_28 promise, on every library of the package (see glibc_compat.h)."""
    from wheelops._compat import loader

    objdump = shutil.which("objdump")
    if objdump is None:
        pytest.skip("objdump (binutils) is not installed")
    libs = loader.loaded()
    assert libs is not None
    folder = libs.cpu.parent
    others = [folder / lib.file for lib in wheelops.build_info().cuda_libraries]
    for library in {libs.cpu, *filter(None, [libs.cuda]), *filter(Path.exists, others)}:
        symbols = subprocess.run(
            [objdump, "-T", str(library)], capture_output=True, text=True, check=True
        ).stdout
        versions = {tuple(map(int, v)) for v in re.findall(r"GLIBC_(\d+)\.(\d+)", symbols)}
        assert max(versions) <= (2, 28), f"{library.name} needs glibc {max(versions)}"
        assert "__libc_single_threaded" not in re.findall(r"\*UND\*.*", symbols).__str__()


@pytest.mark.parametrize(
    ("torch_version", "kept"), [("2.9.1+cu128", False), ("2.13.0+cu130", True)]
)
def test_the_readmes_pinned_install_keeps_torch_or_refuses(tmp_path, torch_version, kept):
    """README, Install: `pip install wheelops "torch==$(python -c ...)"` never replaces the
    torch installed: a torch older than wheelops' floor makes pip refuse (unpinned, it
    installs PyPI's newest torch over it), a newer one is kept."""
    (command,) = [
        line for line in (REPO / "README.md").read_text().splitlines()
        if line.startswith("pip install wheelops ") and "torch==$(python -c" in line
    ]  # fmt: skip
    pyproject = (REPO / "pyproject.toml").read_text()
    requires = re.search(r'^dependencies = \["(torch[^"]*)"\]', pyproject, re.M).group(1)  # type: ignore[union-attr]
    links = tmp_path / "links"
    links.mkdir()
    make_wheel(links, "0.1.0", requires=(requires,))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # A stand-in torch the pin can read: its module and its distribution's metadata.
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(f"__version__ = {torch_version!r}\n")
    dist_info = site / f"torch-{torch_version}.dist-info"
    dist_info.mkdir()
    metadata = f"Metadata-Version: 2.1\nName: torch\nVersion: {torch_version}\n"
    (dist_info / "METADATA").write_text(metadata)
    (dist_info / "RECORD").write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{env['PATH']}",
        PIP_CONFIG_FILE=os.devnull,
        PIP_NO_INDEX="1",  # no index: a torch pip wanted to install would fail otherwise
        PIP_FIND_LINKS=str(links),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    done = subprocess.run(command, shell=True, env=env, capture_output=True, text=True)
    said = done.stdout + done.stderr
    listed = subprocess.run(
        [str(venv / "bin" / "pip"), "list", "--format=json"],
        env=env,
        capture_output=True,
        text=True,
    )
    versions = {d["name"]: d["version"] for d in json.loads(listed.stdout)}
    assert versions["torch"] == torch_version  # never replaced
    if kept:
        assert done.returncode == 0 and versions.get("wheelops") == "0.1.0", said
    else:
        assert done.returncode != 0 and "ResolutionImpossible" in said, said
        assert "wheelops" not in versions
        # Unpinned, pip goes for another torch (none is offered here): the warning's cause.
        plain = subprocess.run(
            "pip install wheelops", shell=True, env=env, capture_output=True, text=True
        )
        assert plain.returncode != 0 and f"requirement {requires}" in plain.stderr, plain.stderr

"""The wheel's SBOM (PEP 770, build_tools/package/sbom.py): valid CycloneDX 1.6, and true to the
build facts and to the files installed."""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from _checkout import REPO

import wheelops
from build_tools.compile import cutlass
from build_tools.package import relabel, sbom
from build_tools.plan import matrix as build_matrix

PACKAGE = Path(wheelops.__file__).parent


def _installed_sbom() -> dict[str, Any]:
    try:
        text = importlib.metadata.distribution("wheelops").read_text(f"sboms/{sbom.SBOM_FILE}")
    except importlib.metadata.PackageNotFoundError:
        text = None
    if text is None or wheelops.build_info().dev_mode:
        pytest.skip("wheelops is not installed from a wheel (dev mode or a checkout)")
    return json.loads(text)


def _needs_validator() -> None:
    """The schema check needs cyclonedx-python-lib (the test sessions install it; a GPU
    machine without network may not have it)."""
    pytest.importorskip(
        "cyclonedx.validation.json", reason="pip install " + sbom.VALIDATOR_REQUIREMENT
    )


def _by_ref(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["bom-ref"]: c for c in doc["components"]}


def _props(component: dict[str, Any]) -> dict[str, str]:
    return {p["name"]: p["value"] for p in component.get("properties", [])}


def test_the_sbom_is_valid_cyclonedx():
    _needs_validator()
    sbom.validate(_installed_sbom())


def test_the_sbom_says_what_the_build_facts_say():
    doc, facts = _installed_sbom(), wheelops.build_info()
    version = importlib.metadata.version("wheelops")
    assert doc["metadata"]["component"]["version"] == version
    assert doc["metadata"]["component"]["purl"] == f"pkg:pypi/wheelops@{version}".replace(
        "+", "%2B"
    )
    components = _by_ref(doc)
    (torch,) = [c for c in components.values() if c["name"] == "torch"]
    assert torch["version"] == facts.torch_version
    assert any(c.get("version") == facts.compiler.split(": ", 1)[-1] for c in doc["components"])
    libraries = [facts.cpu_library, *(lib.file for lib in facts.cuda_libraries)]
    for file in libraries:  # each library as installed, byte for byte
        digest = hashlib.sha256((PACKAGE / file).read_bytes()).hexdigest()
        assert components[f"wheelops/{file}"]["hashes"] == [{"alg": "SHA-256", "content": digest}]
    for lib in facts.cuda_libraries:
        owned = [c for c in doc["components"] if _props(c).get(sbom.LIBRARY) == lib.file]
        props = _props(components[f"wheelops/{lib.file}"])
        assert props["wheelops:sass"].split(",") == list(lib.sass_archs)
        assert props["wheelops:ptx"].split(",") == list(lib.ptx_archs or ["none"])
        names = {c["name"]: c.get("version") for c in owned}
        assert names[f"libcudart.so.{lib.major}"] == lib.cuda_version
        assert names[f"libcublasLt.so.{lib.major}"] == lib.cublaslt_version
        # the toolkit: its nvcc's package at the nvcc version the facts record, hashed
        nvcc = [c for c in owned if "nvcc" in c["name"] or c["name"] == "nvidia-cuda-toolkit"]
        assert nvcc and all(c["hashes"][0]["alg"] == "SHA-256" for c in nvcc)
        assert any(lib.nvcc_version in c["version"] for c in nvcc), (lib.nvcc_version, nvcc)
        cutlass = [c for c in owned if c["name"] == "nvidia-cutlass"]
        assert len(cutlass) == ("9.0" in lib.sass_archs), (lib.file, lib.sass_archs)
        assert all(c["licenses"] == [{"expression": "BSD-3-Clause"}] for c in cutlass)
    refs = set(components) | {doc["metadata"]["component"]["bom-ref"]}
    for dependency in doc["dependencies"]:
        assert dependency["ref"] in refs and set(dependency["dependsOn"]) <= refs


def test_relabel_keeps_the_sbom_true():
    """A slim wheel's SBOM (build_tools/package/relabel.py) names only its own libraries, under its
    own version, and stays valid."""
    _needs_validator()
    doc, facts = _installed_sbom(), wheelops.build_info()
    if not facts.cuda_libraries:
        pytest.skip("a CPU wheel has no CUDA library to drop")
    dropped = facts.cuda_libraries[0].file
    slim = sbom.relabel(doc, "9.9.9+cu999", {dropped})
    sbom.validate(slim)
    assert slim["metadata"]["component"]["purl"] == "pkg:pypi/wheelops@9.9.9%2Bcu999"
    assert f"wheelops/{dropped}" not in _by_ref(slim)
    assert all(_props(c).get(sbom.LIBRARY) != dropped for c in slim["components"])
    kept = [lib.file for lib in facts.cuda_libraries[1:]]
    assert all(f"wheelops/{file}" in _by_ref(slim) for file in kept)


@pytest.mark.parametrize(
    ("damage", "complaint"),
    [
        (lambda d: d.update(specVersion=1.6), "specVersion"),  # a number, not a string
        (lambda d: d["components"][0].update(type="binary"), "type"),  # no such type
        (lambda d: d["components"][0].update(hashes=[{"alg": "SHA-256", "content": "x"}]), ""),
    ],
)
def test_the_schema_check_rejects_a_broken_sbom(damage, complaint):
    _needs_validator()
    doc = _installed_sbom()
    damage(doc)
    with pytest.raises(sbom.SbomError, match=f"not valid CycloneDX 1.6:\n.*{complaint}"):
        sbom.validate(doc)


def test_repair_installs_the_same_schema_check():
    lines = (REPO / "build_tools" / "package" / "repair-requirements.txt").read_text().splitlines()
    assert sbom.VALIDATOR_REQUIREMENT in lines


def test_relabeled_wheels_carry_their_own_sbom(tmp_path):
    """build_tools/package/relabel.py on a wheel holding this install's facts and SBOM: the PyPI
    copy's SBOM names the unlabelled version; a slim wheel's names its one CUDA library."""
    _needs_validator()
    doc, facts = _installed_sbom(), wheelops.build_info()
    if len(facts.cuda_libraries) < 2:
        pytest.skip("needs the universal wheel (a CUDA library per major)")
    base = importlib.metadata.version("wheelops").split("+")[0]
    info = f"wheelops-{base}+universal.dist-info"
    tags = "cp310-abi3-manylinux_2_28_x86_64"
    source = tmp_path / f"wheelops-{base}+universal-{tags}.whl"
    with zipfile.ZipFile(source, "w") as archive:
        archive.writestr("wheelops/_build_info.json", json.dumps(facts.to_dict()))
        for lib in facts.cuda_libraries:
            archive.writestr(f"wheelops/{lib.file}", b"")
        archive.writestr(f"{info}/METADATA", f"Name: wheelops\nVersion: {base}+universal\n")
        archive.writestr(f"{info}/sboms/{sbom.SBOM_FILE}", json.dumps(doc))
        archive.writestr(f"{info}/RECORD", "")
    pypi = sbom.read(relabel.strip_label(source, tmp_path / "pypi"))
    assert pypi["metadata"]["component"]["version"] == base
    assert {c["name"] for c in pypi["components"]} == {c["name"] for c in doc["components"]}
    variant = build_matrix.load().variant("cu130")
    slim = sbom.read(relabel.slim(source, variant, tmp_path / "slim"))
    sbom.validate(slim)
    assert slim["metadata"]["component"]["version"] == f"{base}+cu130"
    owners = {_props(c).get(sbom.LIBRARY) for c in slim["components"]} - {None}
    assert owners == {lib.file for lib in facts.cuda_libraries if lib.major == 13}


def test_the_sbom_names_each_known_licence(tmp_path):
    """wheelops's own licence (the wheel's METADATA), torch's (its METADATA), and those known
    without metadata (GCC's runtime): the components an auditor asks about first."""
    (tmp_path / "_ops_cpu.abi3.so").write_bytes(b"not a library: only hashed")
    facts = {
        "torch_version": "2.14.1",
        "stable_abi_floor": "2.10",
        "compiler": "g++: 12.2.0",
        "cxx_runtime": "libstdc++.so.6",
        "cpu_library": "_ops_cpu.abi3.so",
        "cuda_libraries": [],
        "git_commit": "0" * 40,
        "platform": "linux_x86_64",
    }
    doc = sbom.document(facts, tmp_path, "0.1.0", (), "BSD-3-Clause")
    by_name = {c["name"]: c for c in doc["components"]}
    own = [{"expression": "BSD-3-Clause"}]
    assert doc["metadata"]["component"]["licenses"] == own
    assert by_name["_ops_cpu.abi3.so"]["licenses"] == own
    # The torch installed here: an SPDX expression where its METADATA has one (2.13 and
    # later), its License field as a name where not (the GPU machine's 2.11: BSD-3-Clause).
    torch_metadata = importlib.metadata.metadata("torch")
    expression, name = torch_metadata["License-Expression"], torch_metadata["License"]
    expected = [{"expression": expression}] if expression else [{"license": {"name": name}}]
    assert by_name["torch"]["licenses"] == expected
    assert by_name["libstdc++.so.6"]["licenses"] == [{"expression": sbom.GCC_RUNTIME_LICENSE}]
    assert by_name["g++"]["licenses"] == [{"expression": sbom.GCC_LICENSE}]
    try:
        import cyclonedx.validation.json  # noqa: F401
    except ImportError:
        return  # the schema check needs the validator (the test sessions install it)
    sbom.validate(doc)


def test_cutlass_is_named_with_its_licence_where_the_sm90a_kernels_are(monkeypatch):
    """A CUDA library whose arch list has 9.0 instantiates CUTLASS's templates (its sm_90a
    kernels): the SBOM names the pinned nvidia-cutlass it compiled, BSD-3-Clause; a list
    without 9.0 compiles none, and names none."""

    def installed(name: str, scope: str, library: str | None) -> dict[str, Any]:
        assert (name, scope) == (cutlass.DISTRIBUTION, "excluded")
        return {"name": name, "bom-ref": f"pkg:pypi/{name}#{library}", "properties": []}

    monkeypatch.setattr(sbom, "installed_distribution", installed)
    lib = {"file": "_ops_cuda13.abi3.so", "arch_list": "8.0;9.0;12.0+PTX"}
    component = sbom.cutlass_component(lib)
    assert component is not None
    assert component["licenses"] == [{"expression": "BSD-3-Clause"}]
    assert cutlass.REQUIREMENT.endswith("==4.2.0.0")  # the release whose licence is said
    assert sbom.cutlass_component({**lib, "arch_list": "8.0;10.0;12.0+PTX"}) is None


def test_cutlass_licence_is_the_pinned_releases_own():
    """The copy of CUTLASS's LICENSE.txt the wheels carry is, byte for byte, the one the pinned
    nvidia-cutlass ships (the sha256 its RECORD lists; checked against the installed RECORD
    too where the build's nvidia-cutlass is here), and pyproject ships it."""
    data = (REPO / cutlass.LICENSE_COPY).read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    assert digest == cutlass.LICENSE_RECORD_SHA256
    assert b"NVIDIA CORPORATION" in data and b"SPDX-License-Identifier: BSD-3-Clause" in data
    assert f'"{cutlass.LICENSE_COPY}"' in (REPO / "pyproject.toml").read_text()
    try:
        dist = importlib.metadata.distribution(cutlass.DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return  # only the build environment installs it
    if cutlass.REQUIREMENT.endswith(f"=={dist.version}"):
        (entry,) = [
            f for f in dist.files or () if f.name == "LICENSE.txt" and "licenses" in f.parts
        ]
        assert entry.hash is not None and entry.hash.value == cutlass.LICENSE_RECORD_SHA256


def test_the_wheel_carries_its_licence():
    """LICENSE in the repository and, named by METADATA's License-File, in the wheel, with
    CUTLASS's notice; the SBOM says the licence METADATA says."""
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License")
    assert "Copyright (c) 2026, wheelops contributors\n" in text
    doc = _installed_sbom()
    metadata = importlib.metadata.metadata("wheelops")
    assert metadata["License-Expression"] == "BSD-3-Clause"
    assert metadata.get_all("License-File") == ["LICENSE", cutlass.LICENSE_COPY]
    dist = importlib.metadata.distribution("wheelops")
    assert dist.read_text("licenses/LICENSE") == text
    copy = (REPO / cutlass.LICENSE_COPY).read_text()
    assert dist.read_text(f"licenses/{cutlass.LICENSE_COPY}") == copy
    assert doc["metadata"]["component"]["licenses"] == [{"expression": "BSD-3-Clause"}]

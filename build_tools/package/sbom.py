"""The wheel's CycloneDX SBOM (PEP 770): `<dist-info>/sboms/wheelops.cdx.json`.

    python -m build_tools.package.sbom WHEEL      # validate a wheel's SBOM (CycloneDX 1.6 schema)

Written from the build facts (wheelops/_build_info.json) by the wheel build itself
(setup.py's bdist_wheel, see build_tools/compile/extensions.py), so every wheel carries it:
the package's native libraries (with their sha256 and GPU code), and what they were made
from and need at run time: each CUDA library's toolkit (every pinned download with its
sha256, or the installed PyPI distributions with the sha256 of their RECORD, which lists
the sha256 of each of their files) and CUTLASS where they have the sm_90a kernels, the
torch whose headers they were compiled against, the compiler, the C++ runtime, and the
NVIDIA libraries they link (not in the wheel: torch's CUDA wheels install them); with the
licence of each whose licence is known. auditwheel adds its own `auditwheel.cdx.json` only
for libraries it grafts, and build_tools/package/repair.py lets it graft none; relabel.py keeps
this one true for the wheels it makes (`relabel`).
"""

from __future__ import annotations

import argparse
import email.parser
import hashlib
import importlib.metadata
import json
import sys
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

from build_tools.compat import archs, links
from build_tools.compile import cutlass, flags
from build_tools.plan import build_env, cuda12_toolkit
from build_tools.plan.cuda_toolkit import CudaToolkit

# The schema check's package (it ships the CycloneDX schemas): the test sessions and
# build_tools/package/repair-requirements.txt install it (tests/test_sbom.py checks they agree).
VALIDATOR_REQUIREMENT = "cyclonedx-python-lib[json-validation]==11.12.0"
SBOM_FILE = "wheelops.cdx.json"  # auditwheel's is auditwheel.cdx.json: no clash
SPEC_VERSION = "1.6"
BUILD_INFO = "wheelops/_build_info.json"
LIBRARY = "wheelops:library"  # property: the native library a component belongs to
NVIDIA_RUNTIME = ("libcudart.so", "libcublasLt.so", "libcublas.so")
# Licences known without a distribution's metadata to read: GCC's runtime and compiler,
# and NVIDIA's runtime (its PyPI wheels' METADATA names it so).
GCC_RUNTIME_LICENSE = "GPL-3.0-or-later WITH GCC-exception-3.1"
GCC_LICENSE = "GPL-3.0-or-later"
NVIDIA_LICENSE = "NVIDIA Proprietary Software"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _component(kind: str, name: str, version: str | None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": kind, "name": name}
    if version is not None:
        out["version"] = version
    out.update({k.replace("_", "-"): v for k, v in extra.items() if v is not None})
    return out


def _hashes(digest: str) -> list[dict[str, str]]:
    return [{"alg": "SHA-256", "content": digest}]


def _props(**values: str) -> list[dict[str, str]]:
    return [{"name": f"wheelops:{k.replace('_', '-')}", "value": v} for k, v in values.items()]


def licenses(metadata: Any) -> list[dict[str, Any]] | None:
    """CycloneDX `licenses` from core metadata: its SPDX `License-Expression`, else a short
    `License` field as a name (a long one is the licence's text), else unknown (None)."""
    expression = metadata.get("License-Expression")
    if expression:
        return [{"expression": expression}]
    name = (metadata.get("License") or "").strip()
    if name and "\n" not in name and len(name) <= 100 and name.upper() != "UNKNOWN":
        return [{"license": {"name": name}}]
    return None


def _named(name: str) -> list[dict[str, Any]]:
    return [{"license": {"name": name}}]


def _pypi_purl(name: str, version: str) -> str:
    return f"pkg:pypi/{quote(name.lower())}@{quote(version, safe='')}"


def installed_distribution(name: str, scope: str, library: str | None) -> dict[str, Any]:
    """An installed PyPI distribution the build used, hashed by its RECORD."""
    dist = importlib.metadata.distribution(name)
    record = next((f for f in dist.files or () if f.name == "RECORD"), None)
    digest = sha256(Path(dist.locate_file(record))) if record is not None else None
    purl = _pypi_purl(dist.metadata["Name"], dist.version)
    props = _props(hashed="the installed distribution's RECORD") if digest else []
    if library:
        props.append({"name": LIBRARY, "value": library})
    return _component(
        "library",
        dist.metadata["Name"],
        dist.version,
        bom_ref=f"{purl}#{library}" if library else purl,
        purl=purl,
        scope=scope,
        hashes=_hashes(digest) if digest else None,
        licenses=licenses(dist.metadata),
        properties=props,
    )


def _pinned(pin: cuda12_toolkit.Pinned, library: str) -> dict[str, Any]:
    if pin.location.endswith(".deb"):
        arch = pin.location.rsplit("_", 1)[1].removesuffix(".deb")
        purl = f"pkg:deb/debian/{quote(pin.name)}@{quote(pin.version, safe='')}?arch={arch}"
    else:
        purl = _pypi_purl(pin.name, pin.version)
    return _component(
        "library",
        pin.name,
        pin.version,
        bom_ref=f"{purl}#{library}",
        purl=purl,
        scope="excluded",
        hashes=_hashes(pin.sha256),
        licenses=_named(NVIDIA_LICENSE),  # every pin is NVIDIA's CUDA 12.4 toolkit
        properties=[
            *_props(hashed=f"the downloaded {pin.location}"),
            {"name": LIBRARY, "value": library},
        ],
    )


def _pypi_toolkit_distributions() -> list[str]:
    """The cuda-toolkit metapackage and the distributions its extras that the build
    installs (build_env.TOOLKIT_COMPONENTS) brought."""
    from packaging.requirements import Requirement

    if not _installed("cuda-toolkit"):
        return []
    extras = build_env.TOOLKIT_COMPONENTS.split(",")
    names = {"cuda-toolkit"}
    for line in importlib.metadata.requires("cuda-toolkit") or ():
        requirement = Requirement(line)
        marker = requirement.marker
        if marker is not None and any(marker.evaluate({"extra": e}) for e in extras):
            names.add(requirement.name)
    return sorted(n for n in names if _installed(n))


def _installed(name: str) -> bool:
    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def toolkit_components(toolkit: CudaToolkit, library: str) -> list[dict[str, Any]]:
    """What the CUDA library `library` was compiled with: its toolkit's inputs."""
    if toolkit.origin == cuda12_toolkit.ORIGIN:
        return [_pinned(pin, library) for pin in (*cuda12_toolkit.DEBS, *cuda12_toolkit.WHEELS)]
    if toolkit.origin == "PyPI":
        names = _pypi_toolkit_distributions()
        return [installed_distribution(name, "excluded", library) for name in names]
    return [  # CUDA_HOME (a build image): its nvcc, as found there
        _component(
            "application",
            "nvcc",
            toolkit.version,
            bom_ref=f"nvcc#{library}",
            scope="excluded",
            licenses=_named(NVIDIA_LICENSE),
            hashes=_hashes(sha256(toolkit.nvcc)),
            properties=[
                *_props(hashed=str(toolkit.nvcc), origin=toolkit.origin),
                {"name": LIBRARY, "value": library},
            ],
        )
    ]


def cutlass_component(lib: dict[str, Any]) -> dict[str, Any] | None:
    """CUTLASS, whose templates the sm_90a kernels of the CUDA library `lib` (its build facts)
    instantiate, where its arch list has them (flags.has_sm90a); None where it has not."""
    if not flags.has_sm90a(archs.parse_arch_list(lib["arch_list"])):
        return None
    used = installed_distribution(cutlass.DISTRIBUTION, "excluded", lib["file"])
    # METADATA's License field would give a name; the pinned release's is an SPDX id
    used["licenses"] = [{"expression": cutlass.LICENSE}]
    used["properties"].append(
        {"name": "wheelops:role", "value": "headers compiled into the sm_90a kernels"}
    )
    return used


def document(
    facts: dict[str, Any],
    package: Path,
    version: str,
    toolkits: tuple[CudaToolkit, ...],
    license_expression: str | None = None,
) -> dict[str, Any]:
    """The SBOM of a wheel of `version` whose package folder `package` holds the libraries
    the build facts `facts` name; `toolkits`: those the CUDA libraries were built with;
    `license_expression`: wheelops's own (the wheel's METADATA)."""
    own = [{"expression": license_expression}] if license_expression else None
    me = _pypi_purl("wheelops", version)
    components: list[dict[str, Any]] = []
    depends: dict[str, list[str]] = {me: []}
    torch = installed_distribution("torch", "excluded", None)
    torch["version"] = facts["torch_version"]  # as torch says it ("2.14.1+cu130")
    torch["properties"].append(
        {
            "name": "wheelops:role",
            "value": "headers compiled against "
            "(stable ABI); at run time the user's torch >= "
            f"{facts['stable_abi_floor']} serves",
        }
    )
    compiler_name = facts["compiler"].split(":", 1)[0]
    compiler = _component(
        "application",
        compiler_name,
        facts["compiler"].split(": ", 1)[-1],
        bom_ref="compiler",
        scope="excluded",
        licenses=[{"expression": GCC_LICENSE}] if "g++" in compiler_name else None,
    )
    runtime = _component(
        "library",
        "libstdc++.so.6",
        None,
        bom_ref="libstdc++.so.6",
        scope="required",
        licenses=[{"expression": GCC_RUNTIME_LICENSE}],
        properties=_props(linked=facts["cxx_runtime"] or "none", provided_by="the system"),
    )
    components += [torch, compiler, runtime]
    cuda = {lib["file"]: lib for lib in facts["cuda_libraries"]}
    for file in [facts["cpu_library"], *cuda]:
        path = package / file
        lib = cuda.get(file)
        ref = f"wheelops/{file}"
        props = [{"name": LIBRARY, "value": file}] if lib else []
        if lib:
            props += _props(
                cuda=lib["cuda_version"],
                nvcc=lib["nvcc_version"],
                sass=",".join(lib["sass_archs"]),
                ptx=",".join(lib["ptx_archs"]) or "none",
            )
        components.append(
            _component(
                "library",
                file,
                version,
                bom_ref=ref,
                scope="required",
                hashes=_hashes(sha256(path)),
                licenses=own,
                properties=props or None,
            )
        )
        depends[me].append(ref)
        depends[ref] = [torch["bom-ref"], runtime["bom-ref"], compiler["bom-ref"]]
        if not lib:
            continue
        for soname in sorted(links.link_facts(path).needed):
            if soname.startswith(NVIDIA_RUNTIME):
                dep = _component(
                    "library",
                    soname,
                    lib["cublaslt_version"] if "cublas" in soname else lib["cuda_version"],
                    bom_ref=f"{soname}#{file}",
                    scope="required",
                    licenses=_named(NVIDIA_LICENSE),
                    properties=[
                        *_props(provided_by="torch's CUDA wheels (not in this wheel)"),
                        {"name": LIBRARY, "value": file},
                    ],
                )
                components.append(dep)
                depends[ref].append(dep["bom-ref"])
        toolkit = next(t for t in toolkits if t.release == lib["cuda_version"])
        templates = cutlass_component(lib)
        for used in [*toolkit_components(toolkit, file), *([templates] if templates else [])]:
            components.append(used)
            depends[ref].append(used["bom-ref"])
    return {
        "$schema": "http://cyclonedx.org/schema/bom-1.6.schema.json",
        "bomFormat": "CycloneDX",
        "specVersion": SPEC_VERSION,
        "version": 1,
        "metadata": {
            "component": _component(
                "library",
                "wheelops",
                version,
                bom_ref=me,
                purl=me,
                licenses=own,
                properties=_props(git_commit=facts["git_commit"], platform=facts["platform"]),
            ),
            "tools": {
                "components": [_component("application", "build_tools.package.sbom", version)]
            },
        },
        "components": components,
        "dependencies": [{"ref": ref, "dependsOn": sorted(set(on))} for ref, on in depends.items()],
    }


def write(distinfo: Path, package: Path, version: str, toolkits: tuple[CudaToolkit, ...]) -> Path:
    """Write the SBOM into a wheel's .dist-info folder, from the build facts in `package`."""
    facts = json.loads((package / "_build_info.json").read_text())
    metadata = email.parser.HeaderParser().parsestr((distinfo / "METADATA").read_text())
    sbom = document(facts, package, version, toolkits, metadata.get("License-Expression"))
    path = distinfo / "sboms" / SBOM_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(sbom, indent=1) + "\n")
    return path


def relabel(sbom: dict[str, Any], version: str, dropped: set[str]) -> dict[str, Any]:
    """The SBOM of the same build as `version`, without the CUDA libraries (file names)
    in `dropped` and what only they used."""
    old, new = sbom["metadata"]["component"]["bom-ref"], _pypi_purl("wheelops", version)

    def keeps(component: dict[str, Any]) -> bool:
        owner = [p["value"] for p in component.get("properties", []) if p["name"] == LIBRARY]
        return not owner or owner[0] not in dropped

    components = [
        {**c, "version": version} if c["bom-ref"].startswith("wheelops/") else c
        for c in sbom["components"]
        if keeps(c)
    ]
    refs = {c["bom-ref"] for c in components} | {new}
    dependencies = [
        {
            "ref": new if d["ref"] == old else d["ref"],
            "dependsOn": [r for r in d["dependsOn"] if r in refs],
        }
        for d in sbom["dependencies"]
        if d["ref"] in refs or d["ref"] == old
    ]
    component = {**sbom["metadata"]["component"], "version": version, "bom-ref": new, "purl": new}
    return {
        **sbom,
        "metadata": {**sbom["metadata"], "component": component},
        "components": components,
        "dependencies": dependencies,
    }


class SbomError(ValueError):
    """An SBOM that the CycloneDX schema rejects."""


def validate(sbom: dict[str, Any]) -> None:
    """Raise SbomError unless `sbom` is valid CycloneDX 1.6 (the schema cyclonedx-python-lib
    ships; its validator needs the package's json-validation extra)."""
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    errors = JsonStrictValidator(SchemaVersion.V1_6).validate_str(json.dumps(sbom), all_errors=True)
    found = [f"{e.data.json_path}: {e.data.message}" for e in errors or ()]
    if found:
        raise SbomError("the SBOM is not valid CycloneDX 1.6:\n" + "\n".join(found[:20]))


def read(wheel: Path) -> dict[str, Any]:
    """The SBOM a wheel carries (SbomError if it has none)."""
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if n.endswith(f".dist-info/sboms/{SBOM_FILE}")]
        if len(names) != 1:
            raise SbomError(f"{wheel.name} has no .dist-info/sboms/{SBOM_FILE}")
        return json.loads(archive.read(names[0]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m build_tools.package.sbom", description=__doc__)
    parser.add_argument("wheel", type=Path)
    args = parser.parse_args(argv)
    try:
        validate(read(args.wheel))
    except SbomError as err:
        raise SystemExit(f"{args.wheel.name}: {err}") from None
    print(f"{args.wheel.name}: .dist-info/sboms/{SBOM_FILE} is valid CycloneDX {SPEC_VERSION}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

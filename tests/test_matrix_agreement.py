"""src/wheelops/matrix.json is the one source of truth: nox, the Dockerfile, cibuildwheel, the
workflows and the README must agree with it (these tests read them as text)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from _checkout import REPO

from build_tools.docs import readme
from build_tools.plan import matrix as build_matrix
from build_tools.plan import torch_install
from build_tools.plan.arch_list import parse_arch_list

MATRIX = build_matrix.load()
WORKFLOWS = REPO / ".github" / "workflows"
# A torch or CUDA toolkit release written out by hand: "2.14.1", torch==2.14.1, ...
VERSION_LITERAL = re.compile(
    r"(?:torch|toolkit\S*|cuda\S*)\s*==\s*\d|[\"'](?:2\.1\d\.\d+|1[23]\.\d\.\d+)[\"']"
)


def test_variants_are_consistent():
    assert MATRIX.default_variant in MATRIX.names and MATRIX.pypi_variant in MATRIX.names
    wheels = build_matrix.wheels(MATRIX)
    for v in MATRIX.variants:
        assert set(v.platforms) <= set(build_matrix.RUNNERS)
        assert _release(v.build_torch) >= (2, 10)
        if v in wheels:
            assert v.smoke_torch in v.torch and v.torch == tuple(sorted(v.torch, key=_release))
            # A quick run's torches: releases of the row, or PyPI's newest (torch_install.py).
            assert set(v.quick_torch) <= {*v.torch, torch_install.NEWEST}
        else:  # a part of the universal wheel only
            assert not v.index and not v.torch and v.smoke_torch is None
        if v.parts:
            parts = [MATRIX.variant(name) for name in v.parts]
            majors = [p.cuda.split(".")[0] for p in parts]
            assert len(set(majors)) == len(majors)  # one CUDA library per major
            assert any(p.cuda and p.build_torch == v.build_torch for p in parts)
            assert not v.index and v.cuda is None and v.arch_list is None
            continue
        if v.cuda is None:
            assert v.name == "cpu" and v.arch_list is None and v.toolkit is None
            continue
        assert v.name == "cu" + v.cuda.replace(".", "")
        assert v.toolkit.startswith(v.cuda + ".")
        assert v.toolkit_source in ("pypi", "image", "debian")
        assert parse_arch_list(v.arch_list).sass


def _release(version: str) -> tuple[int, int]:
    major, minor = version.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def test_cuda_13_from_pypi_cuda_12_from_images_or_debian():
    # docs/design.md, matched toolkits: the PyPI CUDA 12 wheels carry no nvcc driver.
    for v in MATRIX.variants:
        if v.cuda:
            cuda_12 = ("image", "debian")
            assert v.toolkit_source in (("pypi",) if v.cuda.startswith("13.") else cuda_12)


def test_noxfile_repeats_nothing_from_the_matrix():
    # The sessions and the steps they run (build_tools/run/).
    for path in [REPO / "noxfile.py", *sorted((REPO / "build_tools" / "run").glob("*.py"))]:
        text = path.read_text()
        assert VERSION_LITERAL.findall(text) == [], path
        assert not re.search(r"['\"]cu1\d\d['\"]", text), path
    assert "build_matrix.test_cells(MATRIX)" in (REPO / "noxfile.py").read_text()


def test_dockerfile_takes_every_version_from_the_matrix():
    text = (REPO / "docker" / "Dockerfile").read_text()
    declared = set(re.findall(r"^ARG (\w+)", text, flags=re.MULTILINE))
    for variant in MATRIX.names:
        for arch in MATRIX.variant(variant).platforms:
            given = set(build_matrix.docker_build_args(MATRIX, variant, arch))
            assert given <= declared, f"{variant}: Dockerfile lacks ARG {given - declared}"
    # NOX_VERSION is the image's own tool pin; everything else comes from docker-args.
    assert declared - set(build_matrix.docker_build_args(MATRIX, "cu126", "x86_64")) == {
        "NOX_VERSION"
    }
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    assert VERSION_LITERAL.findall("\n".join(lines)) == []


def test_cibuildwheel_defaults_are_the_default_variant():
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["cibuildwheel"]
    for arch in ("x86_64", "aarch64"):
        assert config[f"manylinux-{arch}-image"] == MATRIX.image(MATRIX.default_variant, arch)
    assert config["build"] == "cp310-manylinux_*"
    assert "WHEELOPS_VARIANT" in config["environment-pass"]
    assert "python -m build_tools.package.repair" in " ".join(config["repair-wheel-command"])


def test_workflow_matrices_come_from_the_matrix_file():
    wheels = (WORKFLOWS / "wheels.yml").read_text()
    assert "python -m build_tools.plan.matrix github" in wheels
    for job in ("build", "test", "gpu"):
        assert f"matrix: ${{{{ fromJSON(needs.matrix.outputs.{job}) }}}}" in wheels
    for workflow in WORKFLOWS.glob("*.yml"):
        code = "\n".join(line.split("#")[0] for line in workflow.read_text().splitlines())
        assert not re.search(r"\bcu1\d\d\b", code), f"{workflow.name} names a variant by hand"
        assert VERSION_LITERAL.findall(code) == [], workflow.name


def test_workflow_actions_are_pinned_by_commit():
    for workflow in WORKFLOWS.glob("*.yml"):
        for ref in re.findall(r"uses:\s*([^\s#]+)", workflow.read_text()):
            if ref.startswith(("./", "$/")):
                continue
            assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", ref), ref


def test_github_matrices_cover_every_cell():
    jobs = build_matrix.github_matrices(MATRIX)
    builds = {(row["variant"], row["platform"]) for row in jobs["build"]}
    wheels = build_matrix.wheels(MATRIX)
    assert builds == {(v.name, p) for v in wheels for p in v.platforms}
    assert "universal" in {v for v, _ in builds} and "cu124" not in {v for v, _ in builds}
    tests = [(row["variant"], row["torch"]) for row in jobs["test"]]
    assert tests == build_matrix.test_cells(MATRIX)
    gpu = {row["variant"] for row in jobs["gpu"]}
    assert gpu == {v.name for v in wheels if v.cuda or v.parts}


def test_ci_runs_the_readme_test_command():
    command = (REPO / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert command in (REPO / "README.md").read_text()
    assert ".ci/run" in (WORKFLOWS / "ci.yml").read_text()


def test_readme_tables_are_generated_from_the_matrix():
    assert readme.main(["--check"]) == 0, "run: python -m build_tools.docs.readme"


def _code_strings(path: Path) -> set[str]:
    """The string constants of a Python file, docstrings left out."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        if id(node) not in docstrings
    }


def test_one_model_is_the_only_reader_of_the_matrix():
    # A reader names the file in its code as a path (messages and docs may mention it).
    sources = [p for p in REPO.rglob("*.py") if ".nox" not in p.parts and "site" not in p.parts]
    readers = {
        str(p.relative_to(REPO))
        for p in sources
        if p != Path(__file__)
        if any(s.endswith("matrix.json") and " " not in s for s in _code_strings(p))
    }
    assert readers == {"src/wheelops/_compat/matrix.py"}


def test_workflows_and_images_read_the_matrix_through_the_model():
    for path in [*WORKFLOWS.glob("*.yml"), REPO / "docker" / "Dockerfile"]:
        code = "\n".join(line.split("#")[0] for line in path.read_text().splitlines())
        assert "matrix.json" not in code, f"{path.name} reads matrix.json itself"

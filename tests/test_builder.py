"""The one builder of csrc/ (build_tools/compile/builder.py): the commands it assembles for
each kind of library, what it rebuilds, and that nothing else in build_tools compiles
csrc/. Dev mode's whole cycle through it is test_jit's; the wheels' are `nox -s build`'s."""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

import pytest
from _checkout import REPO

from build_tools.compile import builder, cutlass, flags, native_sources
from build_tools.plan.arch_list import parse_arch_list
from build_tools.plan.cuda_toolkit import CudaToolkit


def _toolkit(home: Path) -> CudaToolkit:
    """A CUDA 13 toolkit's layout as cublaslt.find reads it (headers, the sonames); no nvcc
    runs: the commands are only assembled."""
    (home / "include").mkdir(parents=True)
    (home / "lib").mkdir()
    (home / "include" / "cublasLt.h").write_text("")
    versions = {"MAJOR": 13, "MINOR": 1, "PATCH": 0}
    defines = "".join(f"#define CUBLAS_VER_{k} {v}\n" for k, v in versions.items())
    (home / "include" / "cublas_api.h").write_text(defines)
    (home / "lib" / "libcublasLt.so.13").write_text("")
    (home / "lib" / "libcudart.so.13").write_text("")
    nvcc = home / "bin" / "nvcc"
    return CudaToolkit(
        home, nvcc, "13.0.88", home / "include", home / "lib", "libcudart.so.13", "PyPI"
    )


def _sources(job: builder.Job) -> Path:
    return Path(job.command[job.command.index("-c") + 1])


def _depfile_flags(job: builder.Job) -> list[str]:
    """The option that writes the depfile, `-MF` and its path."""
    at = job.command.index("-MF")
    return job.command[at - 1 : at + 2]


def test_cpu_library_compiles_every_cpp_source_once_with_the_wheel_flags(tmp_path):
    library = builder.Library("_ops_cpu", tmp_path / "pkg" / "_ops_cpu.so", tmp_path / "o")
    compiles, link = builder.jobs(library)
    assert [_sources(job) for job in compiles] == native_sources.cpu_sources()
    for job in compiles:
        assert job.command[0] == builder.host_compiler()
        for flag in [*flags.cxx_flags(), "-DTORCH_EXTENSION_NAME=_ops_cpu", "-fPIC"]:
            assert flag in job.command
        assert job.output.parent == tmp_path / "o" and job.stamp.parent == tmp_path / "o"
        assert job.depfile == job.output.with_suffix(".d")
        # Where the depfile is missing: the source and every csrc/ header.
        headers = {*native_sources.CSRC.rglob("*.h"), *native_sources.CSRC.rglob("*.cuh")}
        assert set(job.inputs) == {_sources(job), *headers}
        assert _depfile_flags(job) == ["-MMD", "-MF", str(job.depfile)]
    assert link.command[:2] == [builder.host_compiler(), "-shared"]
    assert link.output == library.output and set(link.inputs) == {j.output for j in compiles}
    assert all(flag in link.command for flag in flags.link_flags())
    # Nothing but the library lands in its folder (a wheel's package).
    assert link.stamp.parent == tmp_path / "o"


@pytest.mark.parametrize("spec", ["8.0;9.0+PTX", "8.0;12.0"])
def test_cuda_library_commands(tmp_path, monkeypatch, spec):
    monkeypatch.setattr(cutlass, "include_dir", lambda: tmp_path / "cutlass-include")
    toolkit, archs = _toolkit(tmp_path / "cuda"), parse_arch_list(spec)
    library = builder.Library("_ops_cuda13", tmp_path / "lib.so", tmp_path / "o", toolkit, archs)
    compiles, link = builder.jobs(library)
    sm90a = [job for job in compiles if _sources(job) in native_sources.sm90a_sources()]
    others = [job for job in compiles if job not in sm90a]
    assert [_sources(job) for job in others] == native_sources.cuda_sources()
    # The sm_90a kernels only where the list has 9.0, for that arch alone, linked last (as
    # setuptools' extra objects were) and started first (they take longest); the other
    # sources then know they are linked in.
    with_sm90a = flags.has_sm90a(archs)
    assert [_sources(job) for job in sm90a] == (native_sources.sm90a_sources() * with_sm90a)
    assert compiles[len(others) :] == sm90a and all(job.slow for job in sm90a)
    assert not any(job.slow for job in others)
    for job in sm90a:
        assert job.command[0] == str(toolkit.nvcc)
        assert [f for f in job.command if f.startswith("-gencode")] == [
            "-gencode=arch=compute_90a,code=sm_90a"
        ]
        assert f"-I{tmp_path / 'cutlass-include'}" in job.command
    device = flags.device_code_flags(archs, toolkit)
    for job in compiles:  # nvcc's depfile option (CUDA 12.4 and 13 alike)
        assert _depfile_flags(job) == ["-MD", "-MF", str(job.output.with_suffix(".d"))]
    for job in others:
        assert job.command[0] == str(toolkit.nvcc)
        assert job.command[-len(device) - with_sm90a :][: len(device)] == device
        assert (flags.SM90A_DEFINE in job.command) == with_sm90a
        assert "-lineinfo" not in job.command  # a wheel's (flags.nvcc_flags says why)
    assert {*link.inputs} == {job.output for job in compiles}
    assert "-l:libcudart.so.13" in link.command and "-l:libcublasLt.so.13" in link.command
    dev = builder.Library(**{**vars(library), "line_info": True})
    assert all("-lineinfo" in job.command for job in builder.jobs(dev)[0])


def _copy_job(tmp_path: Path, source: Path, text: str) -> builder.Job:
    """A job whose 'compiler' copies its source and appends `text` (a different command)."""
    output = tmp_path / "out.txt"
    script = f"import sys; open(sys.argv[2], 'w').write(open(sys.argv[1]).read() + {text!r})"
    command = [sys.executable, "-c", script, str(source), str(output)]
    return builder.Job(command, output, (source,), tmp_path / "out.cmd")


def _age(path: Path, seconds: int) -> None:
    # mtimes set apart by whole seconds: the check must not depend on the clock's grain.
    now = path.stat().st_mtime
    os.utime(path, (now - seconds, now - seconds))


def test_a_job_reruns_when_its_input_or_command_changed(tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("a")
    job = _copy_job(tmp_path, source, "")
    assert not job.up_to_date()  # never run
    job.run()
    _age(source, 10)
    assert job.up_to_date() and job.output.read_text() == "a"
    assert not _copy_job(tmp_path, source, "!").up_to_date()  # another command
    source.write_text("b")  # an edit: the source is newer than the output
    assert not job.up_to_date()
    job.run()
    _age(source, 10)
    assert job.up_to_date() and job.output.read_text() == "b"
    job.stamp.unlink()  # made by an unknown command
    assert not job.up_to_date()


def test_a_failed_command_stops_the_build_and_says_which(tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("a")
    job = builder.Job(
        [sys.executable, "-c", "raise SystemExit('bad')"], tmp_path / "o", (), tmp_path / "o.cmd"
    )
    with pytest.raises(SystemExit, match=r"wheelops build failed:\n.*bad"):
        job.run()
    assert not job.stamp.exists()


# What compiles csrc/ reads its sources from native_sources (an op is found by its files),
# or hands sources to torch's extension builders.
_SOURCES = {"cpu_sources", "cuda_sources", "sm90a_sources"}
_TORCH_BUILDERS = {"CppExtension", "CUDAExtension", "BuildExtension"}


def _compiles(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute) and node.attr == "load":
        return ast.unparse(node.value).endswith("cpp_extension")
    name = getattr(node, "attr", None) or getattr(node, "id", None)
    return name in _SOURCES or name in _TORCH_BUILDERS


def _compiling_functions(path: Path) -> set[str]:
    """`file:function` of each function of `path` that takes csrc/'s sources or calls a
    torch extension builder."""
    name = path.relative_to(REPO).as_posix()
    return {
        f"{name}:{function.name}"
        for function in ast.walk(ast.parse(path.read_text()))
        if isinstance(function, ast.FunctionDef) and any(map(_compiles, ast.walk(function)))
    }


def test_the_builder_is_the_only_thing_that_compiles_csrc():
    found = set().union(*map(_compiling_functions, (REPO / "build_tools").rglob("*.py")))
    in_builder = {f for f in found if f.startswith("build_tools/compile/builder.py:")}
    assert {"cpu_jobs", "cuda_jobs"} <= {f.split(":")[1] for f in in_builder}
    assert found - in_builder == {
        # Names the libraries' sources for setuptools (its Extensions); compiles none.
        "build_tools/compile/extensions.py:extensions",
    }


def _two_sources(tmp_path: Path) -> tuple[Path, list[Path], list[builder.Job], builder.Job]:
    """Two sources, each including a header of its own and a shared one; their compiles
    (as the builder assembles them: g++, a depfile each) and a link, run once and dated
    back (sources 100 s, outputs 50 s: a later edit is newer by whole seconds)."""
    include = tmp_path / "include"
    include.mkdir()
    (include / "shared.h").write_text("inline int shared() { return 1; }\n")
    sources = []
    for name in ("one", "two"):
        (include / f"{name}.h").write_text(f"inline int {name}() {{ return 2; }}\n")
        source = tmp_path / f"{name}.cpp"
        body = f"int f_{name}() {{ return {name}() + shared(); }}"
        source.write_text(f'#include "{name}.h"\n#include "shared.h"\n{body}\n')
        sources.append(source)
    headers = sorted(include.glob("*.h"))
    work, cxx = tmp_path / "o", builder.host_compiler()
    compiles = builder.object_jobs(cxx, sources, work, ["-fPIC", f"-I{include}"], headers)
    library = tmp_path / "lib.so"
    objects = tuple(job.output for job in compiles)
    command = [cxx, "-shared", *map(str, objects), "-o", str(library)]
    link = builder.Job(command, library, objects, work / "link.cmd")
    builder.run_jobs(compiles, link)
    for path in [*sources, *headers]:
        _age(path, 100)
    for path in [*objects, library]:
        _age(path, 50)
    return include, sources, compiles, link


def test_a_header_rebuilds_only_the_objects_whose_depfile_lists_it(tmp_path):
    include, sources, compiles, link = _two_sources(tmp_path)
    one, two = compiles
    assert one.up_to_date() and two.up_to_date() and link.up_to_date()
    # The compiler's list, as the check reads it: the source and its two headers.
    assert one.depfile is not None
    listed = builder.read_depfile(one.depfile)
    assert listed is not None
    assert set(listed) == {sources[0], include / "one.h", include / "shared.h"}
    os.utime(include / "one.h")  # edited: now newer than both objects
    assert not one.up_to_date() and two.up_to_date()
    built_two = two.output.stat().st_mtime
    builder.run_jobs(compiles, link)
    assert one.up_to_date() and link.up_to_date()
    assert two.output.stat().st_mtime == built_two  # not compiled again
    os.utime(include / "shared.h")  # included by both
    assert not one.up_to_date() and not two.up_to_date()


@pytest.mark.parametrize("damage", ["missing", "empty", "no rule", "not text"])
def test_without_a_readable_depfile_every_header_counts(tmp_path, damage):
    include, _, (one, two), _ = _two_sources(tmp_path)
    assert one.depfile is not None
    if damage == "missing":
        one.depfile.unlink()
    elif damage == "not text":
        one.depfile.write_bytes(b"\xff\xfe:\n")
    else:
        one.depfile.write_text("" if damage == "empty" else "not a make rule\n")
    assert builder.read_depfile(one.depfile) is None
    assert one.up_to_date()  # nothing is newer than it yet
    os.utime(include / "two.h")  # only two.cpp includes it, which `one` can no longer tell
    assert not one.up_to_date() and not two.up_to_date()


def test_a_file_the_depfile_lists_that_is_gone_makes_the_object_stale(tmp_path):
    include, _, (one, two), _ = _two_sources(tmp_path)
    (include / "one.h").unlink()  # its compile now fails: run it, and the error says why
    assert not one.up_to_date() and two.up_to_date()


def test_depfiles_as_g_plus_plus_and_nvcc_write_them(tmp_path):
    """g++ -MMD: `obj: src hdr`, a space in a name as `\\ `, `$` as `$$`; nvcc -MD: a
    space before the colon, one file a line."""
    gxx = tmp_path / "gxx.d"
    gxx.write_text("/o/a.o: /s/a.cpp /s/my\\ dir/h.h \\\n /s/c$$.h\n")
    assert builder.read_depfile(gxx) == (Path("/s/a.cpp"), Path("/s/my dir/h.h"), Path("/s/c$.h"))
    nvcc = tmp_path / "nvcc.d"
    nvcc.write_text("/o/a.o : /s/a.cu \\\n    /usr/include/stdc-predef.h \\\n    /s/k.cuh\n")
    assert builder.read_depfile(nvcc) == (
        Path("/s/a.cu"),
        Path("/usr/include/stdc-predef.h"),
        Path("/s/k.cuh"),
    )

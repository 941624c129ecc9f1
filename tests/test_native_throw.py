"""An argument check that throws in native code reaches Python as a RuntimeError
with its whole message, whatever compiler built the library (issue #13).

The GPU machine's compiler, /opt/gcc/bin/g++ (a wrapper around g++ 13.3 that puts
a library directory holding only libstdc++.a first), with Ubuntu Python's
-Bsymbolic-functions, linked the C++ runtime statically into the libraries, a
private, half-interposed copy: every native check crashed the interpreter with
SIGSEGV. Here the same kind of compiler wraps this machine's g++ (that directory,
and -static-libstdc++ -static-libgcc for good measure); the checks run in fresh
processes, where a crash is a failure.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from _checkout import REPO, checkout_copy
from _native_fixtures import compiler

import wheelops

TESTS = Path(__file__).resolve().parent
SPECS = REPO / "specs"  # the op descriptions _native_checks reads (pytest's pythonpath)
# What the link gets on the GPU machine, besides /opt/gcc's static-only directory.
STATIC_RUNTIME_FLAGS = "-static-libstdc++ -static-libgcc -Wl,-Bsymbolic-functions"


def _static_runtime_compiler(where: Path) -> Path:
    """A g++ that links the C++ runtime statically into shared libraries, as /opt/gcc's."""
    cxx = compiler()
    archive = subprocess.run(
        [cxx, "-print-file-name=libstdc++.a"], capture_output=True, text=True, check=True
    ).stdout.strip()
    static_only = where / "static-only"
    static_only.mkdir()
    shutil.copy(archive, static_only / "libstdc++.a")
    wrapper = where / "static-runtime-g++"
    wrapper.write_text(f'#!/bin/sh\nexec {cxx} -B{static_only}/ "$@" {STATIC_RUNTIME_FLAGS}\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper


def _python(
    args: list[str], cwd: Path, env: dict[str, str], timeout: int = 900
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _assert_all_raised(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, (
        f"exit status {result.returncode} (negative: killed by that signal)\n"
        f"{result.stdout}\n{result.stderr[-4000:]}"
    )
    assert ", 0 failures" in result.stdout, result.stdout


def test_every_native_check_raises_in_a_fresh_process():
    # The wheelops under test (an installed wheel, or this checkout's build).
    package_parent = Path(wheelops.__file__).resolve().parent.parent
    path = os.pathsep.join([str(package_parent), str(SPECS)])
    result = _python(["-m", "_native_checks"], TESTS, {"PYTHONPATH": path})
    _assert_all_raised(result)


def _check_library(library: Path) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys; from pathlib import Path\n"
        "from build_tools.compile.cxx_runtime import check_shared_cxx_runtime\n"
        "print(check_shared_cxx_runtime(Path(sys.argv[1]), 'test compiler'))\n"
    )
    return _python(["-c", code, str(library)], REPO, {}, timeout=60)


@pytest.mark.skipif(not (REPO / "build_tools").is_dir(), reason="needs the source checkout")
def test_build_check_refuses_a_library_with_its_own_cxx_runtime(tmp_path):
    source = tmp_path / "throws.cpp"
    source.write_text(
        "#include <sstream>\n#include <stdexcept>\n"
        'extern "C" void check(long n) {\n'
        "  std::ostringstream out; out << n; throw std::runtime_error(out.str()); }\n"
    )
    wrapper = _static_runtime_compiler(tmp_path)
    compile_ = [str(wrapper), "-shared", "-fPIC", str(source)]
    subprocess.run([*compile_, "-o", str(tmp_path / "private.so")], check=True)
    refused = _check_library(tmp_path / "private.so")
    assert refused.returncode != 0
    message = refused.stderr.strip().splitlines()[-1]
    assert "private.so was linked with a private copy of" in message
    assert "the C++ exception runtime" in message and "libstdc++'s locales" in message
    assert "compiler: test compiler" in message and "CXX=" in message

    # The project's link flags get the shared runtime from the same compiler.
    print_flags = "print(' '.join(flags.cxx_runtime_link_flags()))"
    flags = _python(
        ["-c", f"from build_tools.compile import flags; {print_flags}"],
        REPO,
        {},
        timeout=60,
    ).stdout.split()
    subprocess.run([*compile_, *flags, "-o", str(tmp_path / "shared.so")], check=True)
    accepted = _check_library(tmp_path / "shared.so")
    assert accepted.returncode == 0, accepted.stderr
    assert accepted.stdout.strip() == "libstdc++.so.6 (shared)"


def _without_runtime_flags(checkout: Path) -> str:
    flags = checkout / "build_tools" / "compile" / "flags.py"
    original = flags.read_text()
    marker = "def cxx_runtime_link_flags() -> list[str]:\n"
    assert marker in original
    flags.write_text(original.replace(marker, marker + "    return []\n"))
    return original


@pytest.mark.slow
@pytest.mark.parametrize("libraries", ["cpu", pytest.param("all", marks=pytest.mark.gpu)])
def test_dev_build_with_a_static_runtime_compiler(tmp_path, libraries):
    checkout = checkout_copy(tmp_path)
    env = {
        "CXX": str(_static_runtime_compiler(tmp_path)),
        "WHEELOPS_JIT_CACHE": str(tmp_path / "cache"),
        "PYTHONPATH": os.pathsep.join([str(checkout / "src"), str(checkout), str(SPECS)]),
    }
    load = f"import build_tools.dev as j; print(j.load(cuda={libraries == 'all'}).cxx_runtime)"

    # Without the project's runtime flags this compiler embeds the runtime: refused.
    flags_source = _without_runtime_flags(checkout)
    refused = _python(["-c", load], checkout, env)
    assert refused.returncode == 1, refused.stderr[-3000:]
    assert "CxxRuntimeError" in refused.stderr and "private copy of" in refused.stderr

    # With them (only the link changes), the build is accepted and records the runtime...
    (checkout / "build_tools" / "compile" / "flags.py").write_text(flags_source)
    built = _python(["-c", load], checkout, env)
    assert built.returncode == 0, built.stderr[-3000:]
    assert built.stdout.strip().splitlines()[-1] == "libstdc++.so.6 (shared)"

    # ...and every native check raises, in a fresh process.
    _assert_all_raised(_python(["-m", "_native_checks", "--dev", libraries], TESTS, env))

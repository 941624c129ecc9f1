"""A directory served over HTTP on 127.0.0.1: the PEP 503 index stands in for the real one,
made of the wheels under test (wheelhouse_index)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def served(directory: Path) -> Iterator[str]:
    """Serve `directory`; yields its base URL (http://127.0.0.1:PORT)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=directory,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=10)


def wheelhouse_index(wheelhouse: Path, root: Path) -> set[str]:
    """The wheels of this machine in `wheelhouse` as the release lays them out, under
    `root`: whl/<variant>/ for each (an index variant it lacks cut from its universal
    wheel: build_tools/package/relabel.py's slim, its CPU library and the CUDA library of
    the variant's major), and PyPI's wheel unlabelled in pypi/wheelops/. Returns the
    variants served."""

    from build_tools.package import index, relabel
    from build_tools.package.wheel_files import parse
    from wheelops._compat.facts import this_process
    from wheelops._compat.matrix import matrix

    wheels = index.collect([wheelhouse])
    # This machine's: the wheelhouse may hold a cross-built platform's too (universal-aarch64).
    here = this_process().machine
    wheels = [w for w in wheels if w.tags.endswith(here)]
    universal = [w for w in wheels if w.local_label == "universal"]
    have = {w.local_label for w in wheels}
    for variant in matrix().variants:
        if universal and variant.index and variant.name not in have:
            slim = relabel.slim(universal[0].path, variant, root / "slim-wheels")
            wheels.append(parse(slim))
    variants = set(index.generate(wheels, root / "site"))
    pypi = [w for w in wheels if w.local_label == matrix().pypi_variant]
    if pypi:  # PyPI gets it unlabelled (build_tools/package/relabel.py), as the release does
        unlabelled = [parse(relabel.strip_label(w.path, root / "pypi-wheels")) for w in pypi]
        index.project_page(unlabelled, root / "site" / "pypi" / "wheelops")
    return variants

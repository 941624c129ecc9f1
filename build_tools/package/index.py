"""A PEP 503 simple index laid out like PyTorch's, generated from the wheels alone.

    python -m build_tools.package.index dist/repaired --out site

Each wheel goes to whl/<variant>/ where <variant> is its local version label
(wheelops-0.1.0+cu130-... -> whl/cu130/); a wheel without one (the PyPI upload)
has no place here and is refused. Pages:

    whl/index.html                    the variants (for people)
    whl/<variant>/index.html          the projects: wheelops
    whl/<variant>/wheelops/index.html the files, with #sha256= and data-requires-python
    whl/<variant>/wheelops/<wheel> and <wheel>.metadata (PEP 658: pip resolves
                                      without downloading the wheel)

so `pip install wheelops --index-url <site>/whl/<variant>` works from any
static file server (GitHub Pages, `python -m http.server`).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import html
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from build_tools.package.wheel_files import WheelFile, parse

PAGE = """<!DOCTYPE html>
<html>
  <head><meta name="pypi:repository-version" content="1.0"><title>{title}</title></head>
  <body>
    <h1>{title}</h1>
{links}
  </body>
</html>
"""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _page(title: str, links: list[str]) -> str:
    return PAGE.format(title=html.escape(title), links="\n".join(f"    {a}<br>" for a in links))


def _file_link(wheel: WheelFile, copied: Path) -> str:
    metadata = copied.with_name(copied.name + ".metadata")
    metadata.write_bytes(wheel.metadata_bytes())
    attributes = [f'href="{html.escape(copied.name)}#sha256={_sha256(copied)}"']
    requires_python = wheel.requires_python()
    if requires_python:
        attributes.append(f'data-requires-python="{html.escape(requires_python)}"')
    meta_hash = f"sha256={_sha256(metadata)}"
    attributes.append(f'data-dist-info-metadata="{meta_hash}"')
    attributes.append(f'data-core-metadata="{meta_hash}"')
    return f"<a {' '.join(attributes)}>{html.escape(copied.name)}</a>"


def collect(sources: list[Path]) -> list[WheelFile]:
    wheels: list[WheelFile] = []
    for source in sources:
        paths = sorted(source.rglob("*.whl")) if source.is_dir() else [source]
        wheels.extend(parse(p) for p in paths)
    if not wheels:
        raise SystemExit(f"no wheels under {', '.join(map(str, sources))}")
    unlabelled = [w.path.name for w in wheels if w.local_label is None]
    if unlabelled:
        raise SystemExit(
            "these wheels have no variant label (e.g. +cu130) and belong on PyPI, not in "
            f"the index: {', '.join(unlabelled)}"
        )
    return wheels


def project_page(files: list[WheelFile], project_dir: Path) -> None:
    """One project's PEP 503 page with its wheels (and their metadata) beside it."""
    project_dir.mkdir(parents=True)
    links = []
    for wheel in sorted(files, key=lambda w: w.path.name):
        copied = project_dir / wheel.path.name
        shutil.copy2(wheel.path, copied)
        links.append(_file_link(wheel, copied))
    (project_dir / "index.html").write_text(_page(f"Links for {files[0].project}", links))


def generate(wheels: list[WheelFile], out: Path) -> dict[str, list[str]]:
    """Write the index under out/whl; returns variant -> file names."""
    root = out / "whl"
    if root.exists():
        shutil.rmtree(root)
    by_variant: dict[str, dict[str, list[WheelFile]]] = defaultdict(lambda: defaultdict(list))
    for wheel in wheels:
        by_variant[wheel.local_label][wheel.project].append(wheel)
    listing: dict[str, list[str]] = {}
    for variant, projects in sorted(by_variant.items()):
        variant_dir = root / variant
        for project, files in projects.items():
            project_page(files, variant_dir / project)
            listing[variant] = [w.path.name for w in files]
        project_links = [f'<a href="{p}/">{p}</a>' for p in sorted(projects)]
        (variant_dir / "index.html").write_text(_page(f"wheelops index: {variant}", project_links))
    variant_links = [f'<a href="{v}/">{v}</a>' for v in sorted(by_variant)]
    (root / "index.html").write_text(_page("wheelops wheels by variant", variant_links))
    return listing


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@contextlib.contextmanager
def serving(site: Path) -> Iterator[str]:
    """`site` served on loopback while the block runs: yields the root URL of its whl/."""
    port = _free_port()
    command = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
    server = subprocess.Popen(
        [*command, "--directory", str(site)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield f"http://127.0.0.1:{port}/whl"
    finally:
        server.terminate()
        server.wait(timeout=10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m build_tools.package.index", description=__doc__
    )
    parser.add_argument("sources", nargs="+", type=Path, help="wheel files or folders")
    parser.add_argument("--out", type=Path, default=Path("site"))
    args = parser.parse_args(argv)
    for variant, files in generate(collect(args.sources), args.out).items():
        print(f"{args.out}/whl/{variant}/wheelops/: {', '.join(files)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The version users see: `wheelops.__version__` is the installed distribution's (the wheel's
local label included, as importlib.metadata reports it) and `python -m wheelops --version`
prints it."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

from _checkout import REPO, import_build_tools

import wheelops

import_build_tools()

from build_tools.plan import version  # noqa: E402

PACKAGE = Path(wheelops.__file__).resolve().parent


def _distribution_version() -> str | None:
    try:
        dist = importlib.metadata.distribution("wheelops")
    except importlib.metadata.PackageNotFoundError:
        return None
    # this package's own distribution, not another wheelops on the path
    return dist.version if Path(dist.locate_file("wheelops")).resolve() == PACKAGE else None


def test_version_is_the_distributions():
    installed = _distribution_version()
    if installed is None or wheelops.build_info().dev_mode:
        assert wheelops.__version__ == version.base_version()  # a checkout
    else:
        assert wheelops.__version__ == installed  # "0.1.0+universal": the label too


def test_python_m_wheelops_version_prints_it():
    result = subprocess.run(
        [sys.executable, "-m", "wheelops", "--version"],
        capture_output=True,
        text=True,
        cwd=PACKAGE.parent,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"wheelops {wheelops.__version__}"


def test_the_changelog_has_this_version_and_the_readme_the_policy():
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert f"\n## {version.base_version()} " in changelog
    readme = (REPO / "README.md").read_text()
    assert "\n## Versioning\n" in readme and "(CHANGELOG.md)" in readme

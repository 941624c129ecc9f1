"""The version users see: `wheelops.__version__` is the installed distribution's (the wheel's
local label included, as importlib.metadata reports it) and `python -m wheelops --version`
prints it."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

from _checkout import REPO

import wheelops
from build_tools.plan import version

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
        # a checkout: never the release's own version (a report from it names it)
        assert wheelops.__version__ == f"{version.base_version()}+dev"
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
    from wheelops._compat.record import CHECKOUT_LABEL

    said = " ".join(readme.split("\n## Versioning\n", 1)[1].split("\n## ", 1)[0].split())
    assert f"a source checkout (dev mode) says `{version.base_version()}+{CHECKOUT_LABEL}`" in said


def test_a_checkout_a_wheel_and_a_vendored_copy_each_say_theirs(tmp_path):
    """record.version from the files alone: a dist-info's METADATA wins; a package with no
    dist-info is a checkout only when no library is built in it (a vendored copy of an
    installed package has its libraries: the base version, its label lost with METADATA)."""
    from wheelops._compat import record

    site = tmp_path / "site-packages"
    package = site / "wheelops"
    package.mkdir(parents=True)
    assert record.version(package, "1.2.3") == "1.2.3+dev"
    (package / "_ops_cpu.abi3.so").write_bytes(b"")
    assert record.version(package, "1.2.3") == "1.2.3"
    info = site / "wheelops-1.2.3+cu130.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.4\nName: wheelops\nVersion: 1.2.3+cu130\n")
    assert record.version(package, "1.2.3") == "1.2.3+cu130"
    (package / "_ops_cpu.abi3.so").unlink()  # METADATA still names the installed version
    assert record.version(package, "1.2.3") == "1.2.3+cu130"

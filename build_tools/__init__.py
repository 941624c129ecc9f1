"""Build-time helpers for wheelops, by stage; nothing here is shipped in the wheel.

    plan/      what a build is: the matrix, arch lists, version, the exact torch and toolkits
    compile/   csrc/ into the native libraries: flags, sources, compile and link, build facts
    package/   built wheels into checked artifacts: repair, relabel, SBOM, index, emulation
    docs/      the docs' generated tables: compatibility, troubleshooting
    run/       the steps of the nox sessions: build, repair, test, serve, whole e2e rows

Two modules stand apart: compat.py, the bridge every stage uses to the runtime's
compatibility core (src/wheelops/_compat), and dev.py, dev mode (plan and compile in place,
then load), the door the guard's fix messages name (`PYTHONPATH=src python -m build_tools.dev`).
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the checkout (or setuptools' staged copy)
PACKAGE_DIR = ROOT / "src" / "wheelops"  # the package's sources (src layout: DEVELOPING.md)

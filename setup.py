"""Builds wheelops' native libraries; the decisions live in build_tools/.

pyproject's backend (setuptools.build_meta:__legacy__) runs this file with its
folder on sys.path, as `python setup.py` would: that is how build_tools imports.
"""

from setuptools import setup

from build_tools.compile.extensions import bdist_wheel_command, build_ext_command, extensions
from build_tools.compile.flags import PY_LIMITED_API
from build_tools.plan.build_plan import plan_build
from build_tools.plan.version import wheel_version

plan = plan_build()
wheel_options = {"py_limited_api": PY_LIMITED_API}
if plan.target is not None:  # a cross build: the wheel is tagged for its platform
    wheel_options["plat_name"] = plan.target.wheel_platform
setup(
    version=wheel_version(),
    ext_modules=extensions(plan),
    cmdclass={"build_ext": build_ext_command(plan), "bdist_wheel": bdist_wheel_command(plan)},
    options={"bdist_wheel": wheel_options},
)

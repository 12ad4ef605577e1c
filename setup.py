"""Packages found automatically (pyproject.toml holds everything else).

The repository root is the ``lexlens`` package (``package-dir``): its layer folders
``models/``, ``analysis/`` and ``app/`` install as ``lexlens.models``, ``lexlens.analysis``
and ``lexlens.app``. Every folder below them is found here (data folders such as the report
templates and the Streamlit page scripts too, as namespace packages), so a new capability
folder reaches the wheel without a list to keep up to date. The root's modules are
``__init__.py`` and ``pyterrier.py`` (``lexlens.pyterrier``, :data:`ROOT_MODULES`): this file
is not part of the package. ``data/`` ships its sample files as
package data (``lexlens.data``…), not the scripts that made them.
"""

from setuptools import find_namespace_packages, setup
from setuptools.command.build_py import build_py

LAYERS = ("models", "analysis", "app")
#: Folders of sample files: packages for their data only.
DATA = ("data",)
#: The modules of the repository's root that are the package's own.
ROOT_MODULES = ("__init__", "pyterrier")


class BuildPy(build_py):
    """Leave the build script and the data folders' scripts out of the wheel."""

    def find_package_modules(self, package, package_dir):
        found = super().find_package_modules(package, package_dir)
        if package == "lexlens":
            return [m for m in found if m[1] in ROOT_MODULES]
        if package.startswith("lexlens.data"):
            return [m for m in found if m[1] == "__init__"]
        return found


setup(
    packages=["lexlens"]
    + [
        f"lexlens.{name}"
        for name in find_namespace_packages(
            include=[f"{x}*" for x in LAYERS + DATA],
            exclude=["*__pycache__*", "data.mot_results*"],
        )
    ],
    cmdclass={"build_py": BuildPy},
)

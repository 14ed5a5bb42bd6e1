"""The C part of the package: bmq.spark._recdecode, the Spark data source's record decoder
(everything else is declared in pyproject.toml)."""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("bmq.spark._recdecode", ["bmq/spark/_recdecode.c"],
              extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror=vla"]),
])

"""The C part of the package: bmq.spark._recdecode, the Spark data source's record decoder,
bmq.readpath._viewfilter, the record filter of views, and bmq.cleaner._keymap, the log cleaner's
offset map (everything else is declared in pyproject.toml)."""

from setuptools import Extension, setup

_FLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror=vla"]

setup(ext_modules=[
    Extension("bmq.spark._recdecode", ["bmq/spark/_recdecode.c"], extra_compile_args=_FLAGS),
    Extension("bmq.readpath._viewfilter", ["bmq/readpath/_viewfilter.c"],
              extra_compile_args=_FLAGS),
    Extension("bmq.cleaner._keymap", ["bmq/cleaner/_keymap.c"],
              depends=["bmq/cleaner/_batches.h"], extra_compile_args=_FLAGS),
])

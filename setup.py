"""The C part of the package: bmq.spark._recdecode, the Spark data source's record decoder, and
bmq.readpath._viewfilter, the record filter of views, and bmq.coordinators.timers._timerrec,
scheduled delivery's record rewriting (everything else is declared in
pyproject.toml)."""

from setuptools import Extension, setup

_FLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror=vla"]

setup(ext_modules=[
    Extension("bmq.spark._recdecode", ["bmq/spark/_recdecode.c"], extra_compile_args=_FLAGS),
    Extension("bmq.readpath._viewfilter", ["bmq/readpath/_viewfilter.c"],
              extra_compile_args=_FLAGS),
    Extension("bmq.coordinators.timers._timerrec", ["bmq/coordinators/timers/_timerrec.c"],
              extra_compile_args=_FLAGS),
])

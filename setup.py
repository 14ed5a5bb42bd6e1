"""The C part of the package (everything else is declared in pyproject.toml):
bmq.spark.native._recdecode, the Spark data source's record decoder; bmq.readpath._viewfilter,
the record filter of views; bmq.cleaner._keymap, the log cleaner's offset map;
bmq.field_index._fieldindex, Index Query's field scanner; bmq.coordinators.timers._timerrec,
scheduled delivery's record rewriting; bmq.protocol._message_sets, message formats v0/v1 to and
from record batch v2 for old clients."""

from setuptools import Extension, setup

_FLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror=vla"]
# The bytes of Kafka's record format, shared by the modules that include it.
_SHARED = ["bmq/protocol"]
_BYTES = "bmq/protocol/_kafka_bytes.h"

setup(ext_modules=[
    Extension("bmq.spark.native._recdecode", ["bmq/spark/native/_recdecode.c"],
              extra_compile_args=_FLAGS),
    Extension("bmq.readpath._viewfilter", ["bmq/readpath/_viewfilter.c"],
              include_dirs=_SHARED, depends=[_BYTES], extra_compile_args=_FLAGS),
    Extension("bmq.field_index._fieldindex", ["bmq/field_index/_fieldindex.c"],
              include_dirs=_SHARED, depends=[_BYTES], extra_compile_args=_FLAGS),
    Extension("bmq.coordinators.timers._timerrec", ["bmq/coordinators/timers/_timerrec.c"],
              include_dirs=_SHARED, depends=[_BYTES], extra_compile_args=_FLAGS),
    Extension("bmq.protocol._message_sets", ["bmq/protocol/_message_sets.c"],
              include_dirs=_SHARED, depends=[_BYTES], extra_compile_args=_FLAGS),
    Extension("bmq.cleaner._keymap", ["bmq/cleaner/_keymap.c"], include_dirs=_SHARED,
              depends=["bmq/cleaner/_batches.h", _BYTES], extra_compile_args=_FLAGS),
])

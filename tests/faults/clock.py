"""A host's wall clock, which the nemesis can step forward and back as a bad NTP server would:
the host's BMQ processes start under libfaketime (Debian's ``faketime`` package) reading their
offset from a file this module rewrites; libfaketime reads it again within 2 s. Monotonic
clocks are left alone (``FAKETIME_DONT_FAKE_MONOTONIC``), as a step of the real clock would.

libfaketime 0.9.10 breaks ``time.sleep`` when it leaves the monotonic clock alone: it shifts the
absolute monotonic deadline of ``clock_nanosleep`` by the wall clock's offset (EINVAL). A small
preloaded shim, compiled here once, sends monotonic sleeps straight to the kernel."""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")

_SHIM_SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int clock_nanosleep(clockid_t clock, int flags, const struct timespec *request,
                    struct timespec *remain) {
    if (clock == CLOCK_MONOTONIC) {
        return syscall(SYS_clock_nanosleep, clock, flags, request, remain) == 0 ? 0 : errno;
    }
    int (*next)(clockid_t, int, const struct timespec *, struct timespec *) =
        dlsym(RTLD_NEXT, "clock_nanosleep");
    return next(clock, flags, request, remain);
}
"""


def _shim() -> Path:
    """The compiled shim, built once per version of its source (cached in the temp dir)."""
    digest = hashlib.sha256(_SHIM_SOURCE.encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"bmq-faketime-monotonic-sleep-{digest}.so"
    if not path.exists():
        source = path.with_suffix(f".{os.getpid()}.c")
        source.write_text(_SHIM_SOURCE)
        built = path.with_suffix(f".{os.getpid()}.so")
        subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(built), str(source), "-ldl"],
                       check=True, capture_output=True)
        source.unlink()
        built.replace(path)
    return path


class Clock:
    """The offset file of one host's processes; ``env()`` is what to start them with."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "clock-offset"
        self.offset_s = 0
        self.set(0)

    def env(self) -> dict[str, str]:
        return {
            "LD_PRELOAD": f"{_shim()}:{LIBFAKETIME}",
            "FAKETIME_TIMESTAMP_FILE": str(self.path),
            "FAKETIME_CACHE_DURATION": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        }

    def set(self, offset_s: int) -> None:
        """The processes' wall clock is ``offset_s`` seconds off the real one within 2 s
        (libfaketime reads the file again once a second of its cache, in whole seconds)."""
        temporary = self.path.with_suffix(".new")
        temporary.write_text(f"{offset_s:+d}\n")
        temporary.replace(self.path)    # a reader never sees a half-written file
        self.offset_s = offset_s

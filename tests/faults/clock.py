"""A host's wall clock, which the nemesis can step forward and back as a bad NTP server would:
the host's BMQ processes start with a small preloaded library (compiled here once) that adds an
offset to every wall-clock reading (``clock_gettime`` of the realtime clocks, ``gettimeofday``,
``time``). The offset lives in a 16-byte file this module rewrites in place and the library maps,
so a step is seen at once. Monotonic clocks are left alone, as a step of the real clock would.

libfaketime did this before, at a price that distorted every measurement on the fault hosts: each
clock reading took a mutex and parsed its settings again (``getenv``, ``sscanf``), and an
asyncio broker reads the clock thousands of times a second, from several threads. Under the
bench's load (``bench.proxy_faults_hosts``) the brokers spent 50-90% of a core each in it, and
the two cores were saturated before any fault; with this shim they spend 10-15%."""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess
import tempfile
from pathlib import Path

# The offset file: the offset in nanoseconds and its bitwise complement, written in one pwrite;
# a reader takes the offset once both agree (it never uses a torn write).
_OFFSET = struct.Struct("=qq")

_SHIM_SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const volatile int64_t *offset_file;   /* {offset ns, ~offset ns} */
static int (*real_clock_gettime)(clockid_t, struct timespec *);

__attribute__((constructor)) static void map_offset(void) {
    const char *path = getenv("BMQ_CLOCK_OFFSET_FILE");
    if (path == NULL) return;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    void *map = mmap(NULL, 2 * sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (map != MAP_FAILED) offset_file = map;
}

static int64_t offset_ns(void) {
    const volatile int64_t *file = offset_file;
    if (file == NULL) return 0;
    int64_t value = file[0];
    for (int tries = 0; tries < 1000 && file[1] != ~value; tries++) value = file[0];
    return value;
}

static int now(clockid_t clock, struct timespec *ts) {
    if (real_clock_gettime == NULL) real_clock_gettime = dlsym(RTLD_NEXT, "clock_gettime");
    int rc = real_clock_gettime(clock, ts);
    if (rc != 0 || (clock != CLOCK_REALTIME && clock != CLOCK_REALTIME_COARSE)) return rc;
    int64_t ns = ts->tv_nsec + offset_ns();
    ts->tv_sec += ns / 1000000000;
    ts->tv_nsec = ns % 1000000000;
    if (ts->tv_nsec < 0) {
        ts->tv_nsec += 1000000000;
        ts->tv_sec -= 1;
    }
    return rc;
}

int clock_gettime(clockid_t clock, struct timespec *ts) { return now(clock, ts); }

int gettimeofday(struct timeval *tv, void *tz) {
    (void)tz;
    struct timespec ts;
    int rc = now(CLOCK_REALTIME, &ts);
    if (rc == 0 && tv != NULL) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return rc;
}

time_t time(time_t *out) {
    struct timespec ts;
    now(CLOCK_REALTIME, &ts);
    if (out != NULL) *out = ts.tv_sec;
    return ts.tv_sec;
}
"""


def shim() -> Path:
    """The compiled shim, built once per version of its source (cached in the temp dir)."""
    digest = hashlib.sha256(_SHIM_SOURCE.encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"bmq-clock-shim-{digest}.so"
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
        self.path.write_bytes(_OFFSET.pack(0, ~0))   # mapped by the processes: never replaced
        self.offset_s = 0

    def env(self) -> dict[str, str]:
        return {"LD_PRELOAD": str(shim()), "BMQ_CLOCK_OFFSET_FILE": str(self.path)}

    def set(self, offset_s: int) -> None:
        """The processes' wall clock is ``offset_s`` seconds off the real one from now on."""
        offset_ns = offset_s * 1_000_000_000
        fd = os.open(self.path, os.O_WRONLY)
        try:
            os.pwrite(fd, _OFFSET.pack(offset_ns, ~offset_ns), 0)
        finally:
            os.close(fd)
        self.offset_s = offset_s

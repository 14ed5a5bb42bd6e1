"""Server roles give back the free pages glibc's heap keeps after a burst (bmq.lifecycle): a
burst of megabyte buffers served from the heap, one small allocation left above them, the
buffers freed; the process holds their pages until ``trim_free_heap`` runs."""

from __future__ import annotations

import subprocess
import sys

from bmq.lifecycle import glibc_malloc

BURST = r"""
import os
from bmq.lifecycle import glibc_malloc, trim_free_heap

def rss_mib():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

# Freeing a mapped 8 MiB buffer raises glibc's mmap threshold: megabyte buffers then come
# from the heap, as a broker's request frames do once it has served a large one.
scratch = bytearray(8 << 20)
del scratch
buffers = [bytearray(1 << 20) for _ in range(64)]
pin = bytearray(4096)       # lives on, above them
before = rss_mib()
del buffers
freed = rss_mib()
trim_free_heap(glibc_malloc())
print(before, freed, rss_mib())
"""


def test_free_heap_pages_are_given_back() -> None:
    assert glibc_malloc() is not None, "BMQ runs on glibc (Debian)"
    out = subprocess.run([sys.executable, "-c", BURST], capture_output=True, text=True,
                         check=True).stdout
    before, freed, trimmed = (float(x) for x in out.split())
    assert freed > before - 16, "the burst's pages were returned without a trim: no test"
    assert trimmed < freed - 48

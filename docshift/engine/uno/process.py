"""What the warm parent asks of the kernel beside LibreOffice: its share of the CPU, and large folios for the heaps
its children grow.

A child forked from the warm parent has no free memory of its own to reuse, as a warm LibreOffice has: the heap its
conversion grows (17-20 MB, most of it in the reserve of the main loop thread's malloc arena) is new pages, a fault
each. On the project's 2-core machine a child took 6,100 minor faults a file, at 2-3 us each. A kernel since 6.8 can
serve a fault with a folio of several pages (``/sys/kernel/mm/transparent_hugepage/hugepages-<size>/enabled``); at
``madvise``, a size serves only the mappings that ask for it.

``advise_huge_pages`` asks, once, in the parent before its first fork: each private anonymous mapping (malloc's
heaps and the reserves they grow into, the threads' stacks) is marked ``MADV_HUGEPAGE``, and children inherit the
mark. With ``hugepages-64kB`` at ``madvise`` (``make run`` sets it), a child took 3,700 faults a file and 7.8 ms
less CPU (standard error 1.8 ms; 48 corpus files three times, ``bench/huge_pages.py``), its peak RSS unchanged.
With no size at ``madvise`` the mark changes nothing: the 2 MB size, which Debian leaves to the mark, found no
aligned range to fill in those heaps (3 huge pages in 144 files, the child's CPU within the noise)."""

import ctypes
import os
import random
import time

MADV_HUGEPAGE = 14


def advise_huge_pages(maps="/proc/self/maps"):
    """Mark this process's private anonymous mappings ``MADV_HUGEPAGE``; returns how many were marked."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    marked = 0
    with open(maps) as lines:
        for line in lines:
            fields = line.split()
            # anonymous: no path, or the main arena's ``[heap]``; writable, or a reserve a heap grows into
            if fields[1] not in ("rw-p", "---p") or (len(fields) > 5 and fields[5] != "[heap]"):
                continue
            start, end = (int(bound, 16) for bound in fields[0].split("-"))
            marked += libc.madvise(start, end - start, MADV_HUGEPAGE) == 0
    return marked


def yield_the_cpu(nice=None):
    """Give this session's autogroup the nice value the worker gave this process (10), or ``nice``.

    With the kernel's autogroup scheduling (Debian's default), CPU time is shared first between
    sessions and only then by nice value inside each; the sandbox starts a session of its own, so
    LibreOffice's nice 10 alone would still weigh as much as the whole API. Raising the group's
    nice needs no privilege, but the kernel takes one such change per 0.1 s from the unprivileged
    (EAGAIN). Without autogroups the file is missing and nice already works."""
    for _ in range(50):
        try:
            with open("/proc/self/autogroup", "w") as autogroup:
                autogroup.write(str(os.nice(0) if nice is None else nice))
            return
        except BlockingIOError:
            time.sleep(0.05 + random.random() * 0.1)
        except OSError:
            return

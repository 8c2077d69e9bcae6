"""What the warm parent asks of the kernel beside LibreOffice: its share of the CPU, and large pages for the heaps
that its forks copy and its children grow.

``prepare_for_forks`` runs once, after the self-test and before the first fork. Two costs of a child per file were
page tables, measured on the project's 2-core machine (``bench/huge_pages.py``):

- The fork: 10-12 ms of the parent's system time a file, most of it copying the page table entries of its heap, a
  4 KB page each, which the child's exit frees again. Collapsed into 2 MB pages (``MADV_COLLAPSE``, since Linux
  6.1, whatever the machine's huge page settings), each aligned 2 MB of it is one entry: the parent took 3.3 ms
  less a file and each child 3.3 ms less (6.6 ms in all, standard error 1.6 ms, 144 pairs), the parent's RSS the
  same. A child writing in such a page gets its 4 KB copy, as before.
- The heap a child grows (17-20 MB, most of it in the reserve of the main loop thread's malloc arena): new pages,
  a fault each, 6,100 a file; a warm LibreOffice reuses what it freed. The heaps are marked ``MADV_HUGEPAGE``, a mark
  children inherit, so that a kernel since 6.8 serves them the large folios set to ``madvise`` for
  (``/sys/kernel/mm/transparent_hugepage/hugepages-<size>/enabled``). With ``hugepages-64kB`` at ``madvise``, which
  ``make run`` sets, a child takes 3,700 faults a file, and both changes together save 16.5 ms a file (standard
  error 1.7 ms) of the 183 ms the parent and a child spent. With no size at ``madvise`` the mark changes nothing.
"""

import ctypes
import os
import random
import time

MADV_HUGEPAGE = 14
PR_SET_DUMPABLE = 4
MADV_COLLAPSE = 25
HUGE = 1 << 21  # a PMD-mapped huge page, x86-64's


def prepare_for_forks():
    """Mark the private anonymous mappings of this process (no path, or the main arena's ``[heap]``)
    ``MADV_HUGEPAGE``, and put what they hold in 2 MB pages. A kernel without either refuses it, and nothing
    changes."""
    libc = ctypes.CDLL(None)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    mappings = []
    with open("/proc/self/maps") as lines:
        for line in lines:
            fields = line.split()
            if len(fields) == 5 or fields[5] == "[heap]":
                start, end = (int(bound, 16) for bound in fields[0].split("-"))
                mappings.append((fields[1], start, end))
    for permissions, start, end in mappings:
        # writable, or a reserve a heap grows into: the heap a child grows asks for large folios
        if permissions in ("rw-p", "---p"):
            libc.madvise(start, end - start, MADV_HUGEPAGE)
        # what is written there now: each aligned 2 MB in one page, which a fork copies as one entry
        first, last = (start + HUGE - 1) & ~(HUGE - 1), end & ~(HUGE - 1)
        if permissions == "rw-p" and last > first:
            libc.madvise(first, last - first, MADV_COLLAPSE)


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

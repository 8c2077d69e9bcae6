"""The pages of the engine's parent that its children write, and the heap they grow, copied and grown by each child
while it waits for its file.

A child's first write to a page it shares with its parent copies the page, in a fault of its own (4 us here), on
the way of the file's conversion, which a warm LibreOffice, writing pages it owns, does not pay. Over the corpus's
small files a child writes about 2,100 of the parent's pages (reference counts, caches), and most are the same from
file to file. And the heap a conversion grows (the reserve of its thread's malloc arena, opened as it goes) is new
memory, a fault each page or folio. So before the first customer's child, the parent forks ``learners`` children of
each self-test file: each converts that file, then lists the pages of the parent's private writable mappings it
holds alone, which are those it wrote, and the pages of the parent's reserves it opened and wrote
(``/proc/self/pagemap``). What half of them did, every later child does while it waits, before its file comes: it
copies those pages written (about 1,400; ``MADV_POPULATE_WRITE``, since Linux 5.14: 2.7 us a page) and opens and
writes those grown into (about 2,300, 9 MB, 64 KB at a time as malloc opens it). Of the pages copied, a child
converting a corpus file writes about 1,200 anyway, and every file's heap grows further than a self-test file's.
Mapping the libraries' pages the learners ran as well (``MADV_POPULATE_READ``, about 14,000) took 2 ms more off a
file one at a time, but cost 2.4-2.6 ms more CPU a file two at a time (``bench/copies.py``): not done.

A child given a customer's file cannot list its pages: the page map of a process that is not dumpable is closed to
it, and a child made dumpable even for a moment could be opened by a sibling (``/proc/<pid>/mem``) and read later.
The learners hold nothing of anyone's: they are forked before any customer's child, one at a time, and convert
only the self-test's own files. The parent counts only pages of its own mappings.
"""

import array
import bisect
import collections
import contextlib
import ctypes
import functools
import os
import shutil
import signal
import time

import process

MADV_POPULATE_WRITE = 23
PAGE = os.sysconf("SC_PAGE_SIZE")
PRESENT, EXCLUSIVE = 1 << 63, 1 << 56  # a page map entry's flags: present; mapped by this process alone
# a listed page's flag: one of a reserve the parent had not opened yet (a malloc arena's), into which the learner's
# heap grew
GROWN = 1 << 62
# the mappings of the parent whose pages learners list, by their permissions: the flag of such a page in a list
LISTED = {"rw-p": 0, "---p": GROWN}
PROT_READ_WRITE = 3
GROWTH_STEP = 64 << 10  # how much of a reserve a child opens at a time
LEARN_SECONDS = 10  # for all the learners: the worker waits a minute for the self-test's answer, which follows


class Written:
    """In the parent, what its learners wrote; in a child, the runs of pages it copies (``copy``)."""

    def __init__(self, directory):
        self.directory = directory  # where a learner leaves its list, named after it
        self.mappings = []  # (first page, end page, flag) of each private mapping of the parent, when it learns
        self.counts, self.learned = collections.Counter(), 0
        self.runs = []  # (address, bytes, flag) to copy (0) or to open and write (GROWN)

    def learn(self, fork, convert, files, scratch):
        """A learner for each of ``files`` [(path, OOXML filter)], forked with ``fork(become_child)`` (which returns
        its pid, or None) one at a time; ``convert(path, filter, scratch dir)`` is its conversion, ``scratch(pid)``
        its temp dir. The pages half of them wrote are copied by every child forked after. Learners still at work
        after ``LEARN_SECONDS`` in all are killed, and those after them not forked."""
        self.mappings = [(first, end, LISTED[permissions]) for first, end, permissions in maps()
                         if permissions in LISTED]
        deadline = time.monotonic() + LEARN_SECONDS
        for path, ooxml in files:
            pid = fork(functools.partial(self.learner, convert, path, ooxml, scratch))
            if pid is None:
                break
            while os.waitpid(pid, os.WNOHANG)[0] == 0:
                if time.monotonic() > deadline:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    break
                time.sleep(0.002)
            shutil.rmtree(scratch(pid), ignore_errors=True)
            self.count(pid)
            if time.monotonic() > deadline:
                break
        chosen = sorted(page for page, votes in self.counts.items() if 2 * votes >= self.learned)
        self.runs = [(address, size, flag) for flag in (0, GROWN)
                     for address, size in runs([page & ~GROWN for page in chosen if page & GROWN == flag])]

    def summary(self):
        """How many learners were heard, and how many pages a child copies and grows into."""
        pages = dict.fromkeys((0, GROWN), 0)
        for _, size, flag in self.runs:
            pages[flag] += size // PAGE
        return {"learners": self.learned, "copied": pages[0], "grown": pages[GROWN]}

    def learner(self, convert, path, ooxml, scratch, pid):
        """In a learner just forked: convert the file, list the pages written, exit."""
        status = 70
        try:
            ctypes.CDLL(None).prctl(process.PR_SET_DUMPABLE, 1, 0, 0, 0)  # its page map opens: it holds no one's file
            convert(path, ooxml, scratch(pid))
            pages = array.array("Q")
            # of a reserve, only what the learner opened for writing and still has so: never a guard it closed
            opened = [(first, end) for first, end, permissions in maps() if permissions == "rw-p"]
            spans = [(first, end, flag) for first, end, flag in self.mappings if flag != GROWN]
            spans += [(max(first, start), min(end, stop), GROWN) for first, end, flag in self.mappings if flag == GROWN
                      for start, stop in opened if max(first, start) < min(end, stop)]
            with open("/proc/self/pagemap", "rb") as pagemap:
                for first, end, flag in spans:
                    pagemap.seek(first * 8)
                    entries = array.array("Q", pagemap.read((end - first) * 8))
                    pages.extend((first + index) | flag for index, entry in enumerate(entries)
                                 if entry & (PRESENT | EXCLUSIVE) == PRESENT | EXCLUSIVE)
            with open(self.path(os.getpid()), "wb") as out:
                pages.tofile(out)
            status = 0
        finally:
            os._exit(status)

    def path(self, pid):
        return os.path.join(self.directory, f"written-{pid}")

    def count(self, pid):
        """The pages learner ``pid`` listed, counted where they lie in the parent's mappings."""
        path = self.path(pid)
        try:
            with open(path, "rb") as listed:
                data = listed.read()
        except OSError:
            return
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)
        if len(data) % 8:
            return
        starts = [first for first, _, _ in self.mappings]
        self.counts.update({page for page in array.array("Q", data)
                            if (at := bisect.bisect_right(starts, page & ~GROWN) - 1) >= 0
                            and page & ~GROWN < self.mappings[at][1] and page & GROWN == self.mappings[at][2]})
        self.learned += 1

    def copy(self):
        """In a child waiting for its file: the pages most children write, copied, and the heap they grow, opened
        and written, now (a kernel before 5.14 refuses it, and nothing is done). malloc opens its arena's reserve
        again as it grows into it, which changes nothing there now."""
        if not self.runs:
            return
        libc = ctypes.CDLL(None)
        libc.madvise.argtypes = libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        for address, size, flag in self.runs:
            if flag != GROWN:
                libc.madvise(address, size, MADV_POPULATE_WRITE)
                continue
            # opened as malloc opens it, a step at a time: its folios are what a growing heap gets, never a 2 MB
            # page a step could not fill (zeroed whole, and costlier to free)
            end = address + size
            while address < end:
                step = min(end, (address // GROWTH_STEP + 1) * GROWTH_STEP) - address
                if libc.mprotect(address, step, PROT_READ_WRITE) != 0:
                    break
                libc.madvise(address, step, MADV_POPULATE_WRITE)
                address += step


def maps():
    """(first page, end page, permissions) of each mapping of this process."""
    with open("/proc/self/maps") as lines:
        for line in lines:
            bounds, permissions = line.split()[:2]
            yield (*(int(bound, 16) // PAGE for bound in bounds.split("-")), permissions)


def runs(pages):
    """(address, bytes) of each run of consecutive ``pages`` (sorted page numbers)."""
    found = []
    for page in pages:
        if found and found[-1][1] == page:
            found[-1][1] = page + 1
        else:
            found.append([page, page + 1])
    return [(first * PAGE, (end - first) * PAGE) for first, end in found]

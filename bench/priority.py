"""The CPU priority docshift gives its LibreOffice (``process.yield_the_cpu``), for the LibreOffices the benchmarks
set beside it: imported by ``plain_warm.py`` (under LibreOffice's Python) and ``reference.py``, so nothing else here."""

import os

NICE = 10


def same_priority():
    """Nice 10, and this process's session's autogroup at nice 10, so that other load on the machine weighs on both
    sides alike."""
    os.nice(NICE)
    try:
        with open("/proc/self/autogroup", "w") as autogroup:
            autogroup.write(str(NICE))
    except OSError:  # no autogroups: nice alone already works
        pass

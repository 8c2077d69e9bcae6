"""Forks on LibreOffice's main loop, for ``forkit.py``: a child forked so is LibreOffice's main thread, holding its
lock, with the main loop's state as it is between two events (``forkit.py`` says why)."""

import ctypes
import os
import select
import signal
import time

LOCK_SECONDS = 5  # for a child to take LibreOffice's lock
FORK_SECONDS = 10  # for LibreOffice's main loop to run a fork


class MainLoopFork:
    """Forks on LibreOffice's main loop: ``fork(become_child)`` has the main loop run a callback that lets go of the
    SolarMutex, forks, and takes it back on both sides; in the child it then calls ``become_child(pid)``, which
    never returns. Returns the child's pid, or None when the main loop did not run it within ``FORK_SECONDS``.

    The callback forks once this process's own thread says ``go``, after ``addCallback`` returned; that thread then
    waits for the pid, touching nothing of UNO's. Forked while it was on its way out of ``addCallback``, a child
    inherited a lock of UNO's it held, and its first call waited for ever (one in about 700 files, two at a time)."""

    def __init__(self, office):
        import uno
        import unohelper
        from com.sun.star.awt import XCallback

        self.office = office
        office._ZN11Application17ReleaseSolarMutexEv.restype = ctypes.c_uint32  # Application::ReleaseSolarMutex
        office._ZN11Application17AcquireSolarMutexEj.argtypes = [ctypes.c_uint32]  # Application::AcquireSolarMutex
        context = uno.getComponentContext()
        self.callbacks = context.ServiceManager.createInstanceWithContext("com.sun.star.awt.AsyncCallback", context)
        self.told, self.tell = os.pipe2(os.O_CLOEXEC)  # the main loop -> this thread: "<number> <pid>"
        self.go, self.said_go, self.number = *os.pipe2(os.O_CLOEXEC), 0  # this thread -> the main loop: "<number>"
        forks = self

        class Fork(unohelper.Base, XCallback):
            def __init__(self, number, become_child):
                self.number, self.become_child = number, become_child

            def notify(self, data):
                forks.run(self.number, self.become_child)

        self.Fork = Fork

    def run(self, number, become_child):
        """On the main loop: the fork itself, once this process's own thread has said ``go`` for ``number`` (waited
        for without LibreOffice's lock, which nothing takes meanwhile)."""
        held = self.office._ZN11Application17ReleaseSolarMutexEv()
        while int(os.read(self.go, 16).split()[0]) != number:
            pass  # a go for a fork whose callback came too late to be waited for
        pid = os.fork()
        if pid == 0:
            status = 70
            try:
                for fd in (self.told, self.tell, self.go, self.said_go):
                    os.close(fd)
                signal.alarm(LOCK_SECONDS)  # its default action ends a child that cannot take LibreOffice's lock
                self.office._ZN11Application17AcquireSolarMutexEj(held)
                signal.alarm(0)
                become_child(os.getpid())
            finally:
                os._exit(status)
        self.office._ZN11Application17AcquireSolarMutexEj(held)
        os.write(self.tell, f"{number} {pid}\n".encode())

    def fork(self, become_child):
        self.number += 1
        self.callbacks.addCallback(self.Fork(self.number, become_child), None)
        os.write(self.said_go, f"{self.number}\n".encode())
        deadline = time.monotonic() + FORK_SECONDS
        while select.select([self.told], [], [], max(0.0, deadline - time.monotonic()))[0]:
            number, pid = (int(field) for field in os.read(self.told, 32).split())
            if number == self.number:
                return pid
        return None

"""A plain warm LibreOffice, the limit the pool is measured against: load and store, nothing else.

Run under LibreOffice's Python (Debian's python3 with python3-uno) by ``bench/warm.py``:

    /usr/bin/python3 bench/plain_warm.py PROFILE_DIR

It starts one ``soffice`` with a fresh default profile (no docshift settings, no sandbox; at docshift's CPU
priority), then for each stdin line ``source<TAB>target<TAB>export filter`` loads the file hidden, stores it
with the filter and closes it, answering one line: the seconds it took, or ``-1`` when LibreOffice made nothing of it.
"""

import os
import signal
import subprocess
import sys
import time

import uno
from com.sun.star.connection import NoConnectException

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docshift", "engine", "uno"))
from bridge import props
from priority import same_priority


def main():
    profile = os.path.abspath(sys.argv[1])
    pipe = f"plain-warm-{os.getpid()}"
    soffice = subprocess.Popen(
        ["soffice", "--headless", "--invisible", "--nologo", "--norestore", "--nodefault", "--nolockcheck",
         f"-env:UserInstallation={uno.systemPathToFileUrl(profile)}", f"--accept=pipe,name={pipe};urp;"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, preexec_fn=same_priority)
    local = uno.getComponentContext()
    resolver = local.ServiceManager.createInstanceWithContext("com.sun.star.bridge.UnoUrlResolver", local)
    for _ in range(600):
        try:
            context = resolver.resolve(f"uno:pipe,name={pipe};urp;StarOffice.ComponentContext")
            break
        except NoConnectException:
            time.sleep(0.1)
    desktop = context.ServiceManager.createInstanceWithContext("com.sun.star.frame.Desktop", context)
    print("ready", flush=True)
    try:
        for line in sys.stdin:
            source, target, export_filter = line.rstrip("\n").split("\t")
            started = time.perf_counter()
            try:
                document = desktop.loadComponentFromURL(uno.systemPathToFileUrl(source), "_blank", 0,
                                                        props(Hidden=True, ReadOnly=True))
                document.storeToURL(uno.systemPathToFileUrl(target), props(FilterName=export_filter, Overwrite=True))
                document.close(True)
                print(f"{time.perf_counter() - started:.6f}", flush=True)
            except Exception:
                print("-1", flush=True)
    finally:
        os.killpg(soffice.pid, signal.SIGKILL)  # soffice is a launcher: its soffice.bin is in the group


if __name__ == "__main__":
    main()

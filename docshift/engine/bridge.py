"""One warm LibreOffice, driven over UNO; run by ``office.py`` under LibreOffice's Python.

Not imported by docshift itself: it needs the ``uno`` module of Debian's
python3-uno. It starts ``soffice`` listening on a named pipe (a file, so it
works inside a network namespace with no network), then answers one JSON
request per stdin line with one JSON line on stdout:

    {"source": path, "target": path, "filter": name}
    -> {"ok": true, "facts": {...}} | {"ok": false, "error": "load_failed" | "store_failed" | "crashed", "detail": ...}

The first line it writes is ``{"ready": true, "pid": <soffice pid>}``; a request
``{"selftest": directory}`` runs ``selftest.py`` there instead of a conversion. A crash of
LibreOffice is reported as ``crashed`` and ends this process; the supervisor starts
a fresh one.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import selftest
import uno
from com.sun.star.beans import PropertyValue
from com.sun.star.connection import NoConnectException

# UpdateDocMode NO_UPDATE: linked content (images, OLE links, external data) is never refreshed;
# MacroExecutionMode NEVER_EXECUTE: no macro runs, whatever the document asks
LOAD = {"Hidden": True, "ReadOnly": True, "UpdateDocMode": 0, "MacroExecutionMode": 0, "Silent": True}


def props(**values):
    result = []
    for name, value in values.items():
        prop = PropertyValue()
        prop.Name, prop.Value = name, value
        result.append(prop)
    return tuple(result)


def reply(**message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def start(profile, pipe):
    soffice = subprocess.Popen(
        ["soffice", "--headless", "--invisible", "--nologo", "--norestore", "--nodefault",
         "--nolockcheck", "--nofirststartwizard", f"-env:UserInstallation={profile}",
         f"--accept=pipe,name={pipe};urp;StarOffice.ComponentContext"],
        stdin=subprocess.DEVNULL, stdout=sys.stderr, stderr=sys.stderr)
    local = uno.getComponentContext()
    resolver = local.ServiceManager.createInstanceWithContext("com.sun.star.bridge.UnoUrlResolver", local)
    deadline = time.monotonic() + 60
    while True:
        try:
            context = resolver.resolve(f"uno:pipe,name={pipe};urp;StarOffice.ComponentContext")
            break
        except NoConnectException:
            if soffice.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    desktop = context.ServiceManager.createInstanceWithContext("com.sun.star.frame.Desktop", context)
    return soffice, desktop


def facts(document):
    """What the loaded document holds, for the supervisor's no-silent-loss checks."""
    if document.supportsService("com.sun.star.sheet.SpreadsheetDocument"):
        return {"sheets": list(document.getSheets().getElementNames())}
    if document.supportsService("com.sun.star.presentation.PresentationDocument"):
        return {"slides": document.getDrawPages().getCount()}
    if document.supportsService("com.sun.star.text.TextDocument"):
        return {"characters": document.getText().getString().strip().__len__()}
    return {}


def answers(desktop, error=None):
    """False once LibreOffice is gone (crashed, killed) or hurt: a RuntimeException such as
    std::bad_alloc leaves a process that fails whatever it is given next."""
    if error is not None and ("RuntimeException" in type(error).__name__ or "bad_alloc" in str(error)):
        return False
    try:
        desktop.getCurrentComponent()
        return True
    except Exception:
        return False


def convert(desktop, request):
    url = uno.systemPathToFileUrl(request["source"])
    try:
        document = desktop.loadComponentFromURL(url, "_blank", 0, props(**LOAD))
    except Exception as error:  # IllegalArgumentException, IOException: not loadable
        if not answers(desktop, error):
            raise
        return {"ok": False, "error": "load_failed", "detail": f"{type(error).__name__}: {error}"}
    if document is None:
        return {"ok": False, "error": "load_failed", "detail": "nothing loaded"}
    try:
        found = facts(document)
        document.storeToURL(uno.systemPathToFileUrl(request["target"]),
                            props(FilterName=request["filter"], Overwrite=True))
    except Exception as error:
        if not answers(desktop, error):
            raise
        return {"ok": False, "error": "store_failed", "detail": f"{type(error).__name__}: {error}"}
    finally:
        try:
            document.close(True)
        except Exception:
            pass
    return {"ok": True, "facts": found}


def end_group():
    """Kill this process group: soffice is a launcher, and its child soffice.bin would
    outlive a kill of the launcher alone. This process goes with it."""
    os.killpg(os.getpgrp(), signal.SIGKILL)


def watch_parent(parent):
    # the worker that started us died (even mid-conversion): nothing may outlive it
    while os.getppid() == parent:
        time.sleep(1)
    end_group()


def main():
    profile, pipe = sys.argv[1], sys.argv[2]
    threading.Thread(target=watch_parent, args=(os.getppid(),), daemon=True).start()
    try:
        soffice, desktop = start(profile, pipe)
        reply(ready=True, pid=soffice.pid)
        for line in sys.stdin:
            request = json.loads(line)
            try:
                if "selftest" in request:  # office.py asks a fresh LibreOffice this before any work
                    reply(**selftest.run(desktop, request["selftest"], props))
                else:
                    reply(**convert(desktop, request))
            except Exception as error:  # the bridge is gone: LibreOffice crashed or was killed
                reply(ok=False, error="crashed", detail=f"{type(error).__name__}: {error}")
                return 1
        return 0
    finally:
        end_group()


if __name__ == "__main__":
    sys.exit(main())

"""The self-test a fresh LibreOffice passes before it takes work; run by ``bridge.py``.

It makes a tiny Word, Excel and PowerPoint 97 file from scratch, loads each
back and exports it to OOXML: a damaged install that crashes on its first
spreadsheet fails here, not on a customer's file. Making the files is most of
its time (0.4 of 0.55 s), and no customer's conversion stores a legacy format:
the worker keeps the files the first LibreOffice made (they come back in its
answer) and hands them to the later ones, which load and export them only.
Needs LibreOffice's ``uno``.
"""

import base64
import os
import time

import uno

TEXT = "docshift self-test"


def write(document, family):
    if family == "writer":
        document.getText().setString(TEXT)
    elif family == "calc":
        document.getSheets().getByIndex(0).getCellByPosition(0, 0).setValue(42)
    else:
        document.getDrawPages().getByIndex(0).setName(TEXT)


def holds(document, family):
    if family == "writer":
        return document.getText().getString().strip() == TEXT
    if family == "calc":
        return document.getSheets().getByIndex(0).getCellByPosition(0, 0).getValue() == 42
    return document.getDrawPages().getCount() >= 1


def run(desktop, directory, kinds, props, samples=None):
    """``{"ok": True, "seconds": s, "samples": made}`` when every kind converts, else ``{"ok": False, "detail": ...}``.
    ``kinds`` are ``[family, legacy filter, file name, OOXML filter]`` (``docshift.formats.self_test_kinds``,
    sent by soffice.py: this runs under LibreOffice's Python and imports nothing of docshift);
    ``props(**values)`` makes UNO property tuples (the bridge's). ``samples`` ({file name: base64}) are the legacy
    files to load instead of making them; ``made`` is those it made, in the same form ({} when it was given them)."""
    started = time.monotonic()
    os.makedirs(directory, exist_ok=True)
    hidden = props(Hidden=True)
    made = {}
    for family, legacy, name, ooxml in kinds:
        legacy_path = os.path.join(directory, name)
        if samples and name in samples:
            with open(legacy_path, "wb") as sample:
                sample.write(base64.b64decode(samples[name]))
        else:
            # LibreOffice's factories are named after the families: swriter, scalc, simpress
            document = desktop.loadComponentFromURL(f"private:factory/s{family}", "_blank", 0, hidden)
            try:
                write(document, family)
                document.storeToURL(uno.systemPathToFileUrl(legacy_path), props(FilterName=legacy, Overwrite=True))
            finally:
                document.close(True)
            with open(legacy_path, "rb") as sample:
                made[name] = base64.b64encode(sample.read()).decode("ascii")
        document = desktop.loadComponentFromURL(uno.systemPathToFileUrl(legacy_path), "_blank", 0,
                                                props(Hidden=True, ReadOnly=True, UpdateDocMode=0,
                                                      MacroExecutionMode=0, Silent=True))
        if document is None:
            return {"ok": False, "detail": f"{name} did not load back"}
        target = legacy_path + "x"
        try:
            if not holds(document, family):
                return {"ok": False, "detail": f"{name} lost its content"}
            document.storeToURL(uno.systemPathToFileUrl(target), props(FilterName=ooxml, Overwrite=True))
        finally:
            document.close(True)
        if not os.path.exists(target) or os.path.getsize(target) == 0:
            return {"ok": False, "detail": f"{name} exported nothing"}
    return {"ok": True, "seconds": round(time.monotonic() - started, 3), "samples": made}

"""The self-test the forkit's parent passes before it forks a child; run by ``bridge.self_test``.

It makes a tiny Word, Excel and PowerPoint 97 file from scratch, loads each
back and exports it to OOXML: a damaged install that crashes on its first
spreadsheet fails here, not on a customer's file. The bridge then converts
each file it made as a customer's is, which warms what every child inherits.
Needs LibreOffice's ``uno``.
"""

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


def run(desktop, directory, kinds, props):
    """``{"ok": True, "seconds": s}`` when every kind converts, else ``{"ok": False, "detail": ...}``, the files
    left in ``directory``. ``kinds`` are ``[family, legacy filter, file name, OOXML filter]``
    (``docshift.formats.self_test_kinds``, sent by the worker: this runs under LibreOffice's Python and imports
    nothing of docshift); ``props(**values)`` makes UNO property tuples (the bridge's)."""
    started = time.monotonic()
    os.makedirs(directory, exist_ok=True)
    hidden = props(Hidden=True)
    for family, legacy, name, ooxml in kinds:
        legacy_path = os.path.join(directory, name)
        # LibreOffice's factories are named after the families: swriter, scalc, simpress
        document = desktop.loadComponentFromURL(f"private:factory/s{family}", "_blank", 0, hidden)
        try:
            write(document, family)
            document.storeToURL(uno.systemPathToFileUrl(legacy_path), props(FilterName=legacy, Overwrite=True))
        finally:
            document.close(True)
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
    return {"ok": True, "seconds": round(time.monotonic() - started, 3)}

"""The self-test a fresh LibreOffice passes before it takes work; run by ``bridge.py``.

It makes a tiny Word, Excel and PowerPoint 97 file from scratch, loads each
back and exports it to OOXML: a damaged install that crashes on its first
spreadsheet fails here, not on a customer's file. Needs LibreOffice's ``uno``.
"""

import os
import time

import uno

# (factory, legacy filter, file name, OOXML filter)
KINDS = (
    ("swriter", "MS Word 97", "selftest.doc", "MS Word 2007 XML"),
    ("scalc", "MS Excel 97", "selftest.xls", "Calc MS Excel 2007 XML"),
    ("simpress", "MS PowerPoint 97", "selftest.ppt", "Impress MS PowerPoint 2007 XML"),
)
TEXT = "docshift self-test"


def write(document, factory):
    if factory == "swriter":
        document.getText().setString(TEXT)
    elif factory == "scalc":
        document.getSheets().getByIndex(0).getCellByPosition(0, 0).setValue(42)
    else:
        document.getDrawPages().getByIndex(0).setName(TEXT)


def holds(document, factory):
    if factory == "swriter":
        return document.getText().getString().strip() == TEXT
    if factory == "scalc":
        return document.getSheets().getByIndex(0).getCellByPosition(0, 0).getValue() == 42
    return document.getDrawPages().getCount() >= 1


def run(desktop, directory, props):
    """``{"ok": True, "seconds": s}`` when all three kinds convert, else ``{"ok": False, "detail": ...}``.
    ``props(**values)`` makes UNO property tuples (the bridge's)."""
    started = time.monotonic()
    os.makedirs(directory, exist_ok=True)
    hidden = props(Hidden=True)
    for factory, legacy, name, ooxml in KINDS:
        legacy_path = os.path.join(directory, name)
        document = desktop.loadComponentFromURL(f"private:factory/{factory}", "_blank", 0, hidden)
        try:
            write(document, factory)
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
            if not holds(document, factory):
                return {"ok": False, "detail": f"{name} lost its content"}
            document.storeToURL(uno.systemPathToFileUrl(target), props(FilterName=ooxml, Overwrite=True))
        finally:
            document.close(True)
        if not os.path.exists(target) or os.path.getsize(target) == 0:
            return {"ok": False, "detail": f"{name} exported nothing"}
    return {"ok": True, "seconds": round(time.monotonic() - started, 3)}

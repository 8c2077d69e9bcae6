"""What a workbook keeps from its user, put back into the .xlsx where LibreOffice loses it: sheets that only a macro
unhides, the recommendation to open it read-only, and the protection of its structure and windows.

A sheet an .xls marks very hidden (BOUNDSHEET's hsState 2) is not listed by Excel's Unhide; a macro workbook keeps
its lookup tables and settings there. LibreOffice knows hidden and shown only, and its export writes such a sheet as
``state="hidden"``, which anyone can unhide. A workbook whose author asked Excel to recommend opening it read-only,
or set a password to modify it, says so in its FILESHARING record. LibreOffice's import reads the recommendation (its
ODF says LoadReadonly) and not the password; its OOXML export writes no ``fileSharing``, and marks the workbook final
instead (``_MarkAsFinal``), which Excel shows as a bar over a workbook it opens read-write, not as its question. Of
685 workbooks of the corpus and POI's and LibreOffice's tests, one had a very hidden sheet and three recommended
read-only.

A workbook whose structure is protected (no sheet added, removed, renamed, moved, hidden or shown: its PROTECT
record), or its windows (WINDOWPROTECT), with or without a password (PASSWORD's hash, which OOXML keeps as it is),
loads so in LibreOffice, whose export writes ``lockWindows`` only, without ``lockStructure`` or the hash: a
plain ``soffice`` loses them too. Excel writes such a workbook encrypted with its default password, which opens
without asking.

``mend`` gives the result's ``sheet`` elements of those sheets ``state="veryHidden"`` (``Inventory.very_hidden``),
its workbook part a ``fileSharing`` with what the .xls sets (``Inventory.sharing``), in its place: after
``fileVersion``, before ``workbookPr``, and a ``workbookProtection`` with what it locks (``Inventory.protection``),
before ``bookViews``. Every other byte stays as LibreOffice wrote it.
"""

from pathlib import Path

from docshift.engine import ooxml
from docshift.engine.embedding import edited
from docshift.engine.inventory.common import Unreadable
from docshift.engine.inventory.package import NS_S, SEP

SHEET, SHARING, VERSION, PROTECTION, VIEWS, SHEETS = (f"{NS_S}{SEP}{local}" for local in (
    "sheet", "fileSharing", "fileVersion", "workbookProtection", "bookViews", "sheets"))
MAIN = "xl/workbook.xml"


def mend(result: Path, kind: str, very_hidden: list[str], sharing: dict[str, str],
         protection: dict[str, str] | None = None) -> int:
    """Give ``result`` (LibreOffice's export of an .xls) its ``very_hidden`` sheets, the ``sharing`` settings
    (``fileSharing``'s attributes) and the ``protection`` (``workbookProtection``'s) of the .xls. Returns how many went
    in (0: the file is untouched). Never raises for what the file holds."""
    protection = protection or {}
    if kind != "xls" or not (very_hidden or sharing or protection):
        return 0
    return edited(result, lambda package: [(MAIN, lambda data, name: kept(data, name, set(very_hidden), sharing,
                                                                         protection))]
                  if MAIN in package.names else [],
                  "the sheets' states, sharing and protection of %s stay as LibreOffice wrote them: %r")


def kept(data: bytes, name: str, very_hidden: set[str], sharing: dict[str, str],
         protection: dict[str, str] | None = None) -> tuple[bytes, int]:
    """(the workbook part ``name`` (``data``) with the sheets named ``very_hidden`` very hidden, a ``fileSharing`` of
    ``sharing``'s attributes and a ``workbookProtection`` of ``protection``'s; how many of the three kinds went in)."""
    protection = protection or {}
    found: dict[str, int] = {}  # where the root starts, fileVersion starts and ends, a fileSharing, bookViews...

    def start(tag: str, _: dict[str, str]) -> None:
        found.setdefault("root", reader.CurrentByteIndex)
        if tag in (VERSION, SHARING, PROTECTION, VIEWS, SHEETS):
            found.setdefault(tag, reader.CurrentByteIndex)

    def end(tag: str) -> None:
        if tag == VERSION:
            found["version end"] = reader.CurrentByteIndex

    reader = ooxml.parser(name, Unreadable, start, end)
    ooxml.feed(reader, (data,), name, Unreadable)
    prefix, given = ooxml.prefix(data, found["root"], name), 0
    before = found.get(VIEWS, found.get(SHEETS))
    if protection and PROTECTION not in found and before is not None:  # after fileSharing: it goes in first
        data = data[:before] + f"<{prefix}workbookProtection{_attributes(protection)}/>".encode() + data[before:]
        given += 1
    if sharing and SHARING not in found:
        at = ooxml.element_end(data, found[VERSION], found["version end"], name) if VERSION in found else \
            ooxml.start_tag(data, found["root"], name)[1].end()
        data = data[:at] + f"<{prefix}fileSharing{_attributes(sharing)}/>".encode() + data[at:]
        given += 1

    def edit(tag: str, attributes: dict[str, str]) -> dict[str, str | None] | None:
        nonlocal given
        if (tag == SHEET and ooxml.xstring(attributes.get("name", "")) in very_hidden
                and attributes.get("state") != "veryHidden"):
            given += 1
            return {"state": "veryHidden"}
        if tag == SHARING and SHARING in found and (changes := {
                key: value for key, value in sharing.items() if attributes.get(key) != value}):
            given += 1
            return dict(changes)
        if tag == PROTECTION and (changes := {key: value for key, value in protection.items()
                                              if attributes.get(key) not in (value, "true")}):
            given += 1
            return dict(changes)
        return None

    return ooxml.edit_tags(data, name, edit), given


def _attributes(values: dict[str, str]) -> str:
    return "".join(f' {key}="{ooxml.attribute_value(value)}"' for key, value in sorted(values.items()))

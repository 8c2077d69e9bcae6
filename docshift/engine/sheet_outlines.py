"""Where a sheet's outline puts its summaries, put back into the .xlsx: a WSBOOL record's fRowSumsBelow,
fColSumsRight and fApplyStyles.

A sheet whose grouped rows have their total above them (or grouped columns theirs on the left) shows its outline's
buttons there. LibreOffice's model has no room for that, and its export writes no ``outlinePr``: of 685 workbooks of
the corpus and POI's and LibreOffice's tests, 8 sheets of 8 workbooks had summaries above or left, or styles applied
to their outline, and came out as Excel's default.

``mend`` gives each such sheet's ``sheetPr`` an ``outlinePr`` of the .xls's settings (``Inventory.outlines``), where
the schema puts it: after ``tabColor``, before ``pageSetUpPr``; the ``sheetPr`` itself, first in the sheet, where
there is none. Every other byte stays as it was.
"""

from pathlib import Path

from docshift.engine import ooxml, sheet_objects
from docshift.engine.embedding import PartEdit
from docshift.engine.inventory.common import Unreadable
from docshift.engine.inventory.package import NS_S, SEP
from docshift.engine.sheet_skeleton import without_cells

SHEET_PROPERTIES, TAB_COLOUR, OUTLINE = (f"{NS_S}{SEP}{local}" for local in ("sheetPr", "tabColor", "outlinePr"))


def mend(result: Path, kind: str, outlines: dict[str, dict[str, str]]) -> int:
    """Give the sheets of ``result`` (LibreOffice's export of an .xls) the outline settings (``outlinePr``'s
    attributes) of the legacy file's (``outlines``: {sheet name: its settings}). Returns how many sheets were given
    theirs (0: the file is untouched). Never raises for what the file holds."""
    if kind != "xls" or not outlines:
        return 0
    return sheet_objects.edit_sheets(result, outlines, _outlining,
                                     "the outlines' settings of %s stay as LibreOffice wrote them: %r")


def _outlining(wanted: dict[str, str]) -> PartEdit:
    """The edit of a worksheet part that gives it the outline settings ``wanted``."""
    return without_cells(lambda data, name: (outlined(data, name, wanted), 1))


def outlined(data: bytes, name: str, wanted: dict[str, str]) -> bytes:
    """The worksheet part ``name`` (``data``) whose ``outlinePr`` has the attributes ``wanted``: its own where it has
    one, else one in its place."""
    # where the root, the first of its children, sheetPr, its first child and tabColor start; sheetPr, tabColor end
    places: dict[str, int] = {}
    depth = 0

    def start(tag: str, _: dict[str, str]) -> None:
        nonlocal depth
        depth += 1
        at = reader.CurrentByteIndex
        if depth == 1:
            places["root"] = at
        elif depth == 2:
            places.setdefault("first", at)
            if tag == SHEET_PROPERTIES:
                places["sheetPr"] = at
        elif depth == 3 and "sheetPr" in places and "sheetPr end" not in places:
            places.setdefault("inside", at)
            if tag in (TAB_COLOUR, OUTLINE):
                places[tag] = at

    def end(tag: str) -> None:
        nonlocal depth
        depth -= 1
        if tag == SHEET_PROPERTIES and depth == 1:
            places["sheetPr end"] = reader.CurrentByteIndex
        elif tag == TAB_COLOUR and depth == 2:
            places.setdefault("tabColor end", reader.CurrentByteIndex)

    reader = ooxml.parser(name, Unreadable, start, end)
    ooxml.feed(reader, (data,), name, Unreadable)
    if OUTLINE in places:
        return ooxml.edit_tags(data, name, lambda tag, attributes: {
            key: value for key, value in wanted.items() if attributes.get(key) != value} or None
            if tag == OUTLINE else None)
    prefix = ooxml.prefix(data, places["root"], name)
    attributes = "".join(f' {key}="{ooxml.attribute_value(value)}"' for key, value in sorted(wanted.items()))
    added = f"<{prefix}outlinePr{attributes}/>".encode()
    if "sheetPr" not in places:
        if "first" not in places:
            raise Unreadable(f"{name}: an empty worksheet")
        at = places["first"]
        return data[:at] + f"<{prefix}sheetPr>".encode() + added + f"</{prefix}sheetPr>".encode() + data[at:]
    own, tag_end, _ = ooxml.start_tag(data, places["sheetPr"], name)
    if tag_end.group().endswith(b"/>"):  # <sheetPr .../>: opened, given the outline, and closed
        return data[:tag_end.start()] + b">" + added + b"</" + own + b">" + data[tag_end.end():]
    if TAB_COLOUR in places:
        at = ooxml.element_end(data, places[TAB_COLOUR], places["tabColor end"], name)
    else:
        at = places.get("inside", places["sheetPr end"])
    return data[:at] + added + data[at:]

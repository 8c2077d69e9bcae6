"""Cells whose errors a workbook's author told Excel not to flag, put back into the .xlsx.

Excel marks a cell it suspects with a green triangle: a number stored as text, a formula unlike its neighbours'. An
author who means it (codes with leading zeros, a total row) tells Excel to ignore the error, and an .xls keeps that
in a FEAT record of the sheet (ISFFEC2: the ranges and the checks). LibreOffice's import does not read it: of 685
workbooks of the corpus and POI's and LibreOffice's tests, 4 had such records, and in Excel the triangles came back
on each of their cells.

``mend`` writes each sheet's records (``Inventory.ignored``) as ``ignoredErrors``, one ``ignoredError`` a record,
in the place the schema gives it: before the first of the sheet's drawing, legacy drawing, objects, controls,
tables and extensions, or at its end. A sheet that has ``ignoredErrors`` already is left as it is.
"""

from pathlib import Path

from docshift.engine import ooxml, sheet_objects
from docshift.engine.embedding import PartEdit, child_place
from docshift.engine.inventory.common import Ignored
from docshift.engine.inventory.package import NS_MC, NS_S, SEP
from docshift.engine.sheet_skeleton import without_cells

IGNORED_ERRORS = f"{NS_S}{SEP}ignoredErrors"
# the worksheet's children that follow ignoredErrors (CT_Worksheet), and the markup-compatibility wrapper
# LibreOffice writes around its objects and controls
AFTER = {f"{NS_S}{SEP}{local}" for local in ("smartTags", "drawing", "legacyDrawing", "legacyDrawingHF", "drawingHF",
                                              "picture", "oleObjects", "controls", "webPublishItems", "tableParts",
                                              "extLst")} | {f"{NS_MC}{SEP}AlternateContent"}


def mend(result: Path, kind: str, ignored: dict[str, list[Ignored]]) -> int:
    """Give the sheets of ``result`` (LibreOffice's export of an .xls) the errors not to flag of the legacy file's
    (``ignored``: {sheet name: its records}). Returns how many sheets were given theirs (0: the file is untouched).
    Never raises for what the file holds."""
    if kind != "xls" or not ignored:
        return 0
    return sheet_objects.edit_sheets(result, ignored, _ignoring, "the errors not to flag of %s stay unwritten: %r")


def _ignoring(records: list[Ignored]) -> PartEdit:
    """The edit of a worksheet part that gives it ``records``."""
    return without_cells(lambda data, name: (ignoring(data, name, records), 1))


def ignoring(data: bytes, name: str, records: list[Ignored]) -> bytes:
    """The worksheet part ``name`` (``data``) with ``records`` as its ``ignoredErrors``, every other byte as it was;
    as it was where it has them already."""
    found, at, root = child_place(data, name, IGNORED_ERRORS, AFTER)
    if found:
        return data
    prefix = ooxml.prefix(data, root, name)
    errors = "".join(f'<{prefix}ignoredError sqref="{sheet_objects.sqref(record.ranges)}"'
                     + "".join(f' {check}="1"' for check in record.checks) + "/>" for record in records)
    return data[:at] + f"<{prefix}ignoredErrors>{errors}</{prefix}ignoredErrors>".encode() + data[at:]


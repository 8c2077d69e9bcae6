"""The macros an .xls's drawing shapes run when clicked, put back on the .xlsx's shapes.

Excel lets any shape of a sheet (a rectangle, an arrow, a picture, a chart) run a macro when it is clicked, and
workbooks use it for buttons drawn as shapes. The .xls keeps it in the shape's OBJ record: an FtMacro whose formula
names a defined name of the workbook ([MS-XLS] 2.5.xxx; ``form_controls.macro_names``). LibreOffice 25.2 loads it
(its ODF export holds the click) and its .xlsx export writes the shape without it. Excel keeps it in the ``macro``
attribute of the shape's element in the sheet's drawing (``xdr:sp``, ``xdr:pic``, ``xdr:cxnSp``,
``xdr:graphicFrame``: "[0]!name"). ``mend`` writes it there, on the shape LibreOffice wrote under the same name,
where the result keeps the VBA project; a shape whose name is not one of a kind on both sides is left as it was.
Form and ActiveX controls are not shapes here: ``form_controls`` and ``sheet_activex`` put them back.
"""

import struct
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from docshift.engine import cfb, ooxml, sheet_objects, sheet_shapes
from docshift.engine.embedding import PartEdit, edit_parts, guarded
from docshift.engine.form_controls import FT_MACRO, KINDS, formula, macro_names, sub_records
from docshift.engine.inventory.package import SEP, Package
from docshift.engine.inventory.sheet_controls import is_control

XDR = "http://schemas.openxmlformats.org/drawingml/2006/spreadsheetDrawing"
SHAPES = {f"{XDR}{SEP}{name}" for name in ("sp", "pic", "cxnSp", "graphicFrame", "grpSp")}
GROUP, NAMED = f"{XDR}{SEP}grpSp", f"{XDR}{SEP}cNvPr"  # a group's element has no macro


def mend(result: Path, source: Path, kind: str, expected: int | None, macros: bool) -> int:
    """Give each shape of ``result`` (LibreOffice's .xlsx of the .xls ``source``) the macro its legacy shape runs,
    where the result keeps the VBA project (``macros``); ``expected``: how many shapes of the legacy file run one
    (the report's ``actions``: nothing is read when none does). Returns how many were given one (0: the file is
    untouched). Never raises for what the files hold."""
    if kind != "xls" or not macros or not expected:
        return 0
    return guarded(_mend, result, source, "the shapes' macros of %s stay as LibreOffice wrote them: %r")


def _mend(result: Path, source: Path) -> int:
    with cfb.CompoundFile(source) as ole:
        sheets = _source_macros(ole)
    if not any(sheets.values()):
        return 0

    def parts(package: Package) -> Iterator[tuple[str, PartEdit]]:
        for _, name, part in sheet_objects.worksheets(package):
            for drawing in sheet_objects.drawings_of(package, part) if sheets.get(name) else []:
                yield drawing, _giving(sheets[name])

    return edit_parts(result, parts)


def _giving(macros: dict[str, str]) -> PartEdit:
    """The edit of a drawing part that gives its shapes ``macros`` ({shape name: macro}, ``_given``)."""
    return lambda data, part: _given(data, part, macros)


def _source_macros(ole: cfb.CompoundFile) -> dict[str, dict[str, str]]:
    """{sheet name, cut as the result's: {shape name: the macro it runs, "[0]!name"}} of the shapes, not controls,
    whose name is one of a kind on their sheet."""
    book, budget = sheet_objects.records_of(ole)
    if book is None or not book.names:
        return {}
    macro = macro_names(book, True)
    found: dict[str, dict[str, str]] = {}
    for _, sheet, pairs in sheet_shapes.paired(book, budget):
        names = Counter(shape.name for shape, _ in pairs)
        runs: dict[str, str] = {}
        for shape, record in pairs:
            subrecords = sub_records(record)
            if not shape.name or names[shape.name] > 1 or is_control(record) or not subrecords or \
                    len(subrecords[0][1]) < 2 or struct.unpack_from("<H", subrecords[0][1])[0] in KINDS:
                continue
            fields = dict(subrecords[1:])
            if FT_MACRO in fields and formula(fields[FT_MACRO]) != "" and (name := macro(fields[FT_MACRO])):
                runs[shape.name] = f"[0]!{name}"
        found[sheet] = runs
    return found


def _given(data: bytes, part: str, runs: dict[str, str]) -> tuple[bytes, int]:
    """(the drawing ``data`` with each shape named in ``runs`` given its macro, how many were)."""
    names: list[str] = []  # each shape's name, in document order

    def name_of(tag: str, attributes: dict[str, str]) -> None:
        if tag in SHAPES:
            names.append("")
        elif tag == NAMED and names and not names[-1]:
            names[-1] = attributes.get("name", "")
    ooxml.edit_tags(data, part, name_of)
    counts = Counter(names)
    shapes = iter(names)
    given = 0

    def give(tag: str, attributes: dict[str, str]) -> dict[str, str] | None:
        nonlocal given
        if tag not in SHAPES:
            return None
        name = next(shapes, "")
        if tag == GROUP or name not in runs or counts[name] > 1 or attributes.get("macro"):
            return None
        given += 1
        return {"macro": runs[name]}
    edited = ooxml.edit_tags(data, part, give)
    return edited, given

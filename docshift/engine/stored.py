"""Formula results as the source stored them, written back into an .xlsx that LibreOffice recalculated.

LibreOffice recalculates every formula of an .xls it loads (its Excel import ends with
``CalcAfterLoad``, which marks every formula cell dirty), and no setting or load option
turns that off for the binary format: ``Formula/Load/OOXMLRecalcMode`` and ``ODFRecalcMode``
apply to .xlsx and .ods only. Turning AutoCalc off keeps numeric results but loses every
stored text, boolean and error result. So the export is left as it is, and where a formula
cell's value in the result differs from what Excel stored (calls of VBA user-defined
functions, add-in functions, stale results, functions LibreOffice computes otherwise), the
stored value is written into that cell's ``<v>``, its formula kept. Readers of cached values
then see what the source showed.
"""

import math
import posixpath
import re
import zipfile
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from docshift.engine import inventory, ooxml
from docshift.engine.inventory.common import MAX_PART
from docshift.engine.inventory.xls import NOT_A_NUMBER  # the error Excel shows for a number it cannot hold

SHEET = f"{ooxml.SPREADSHEET}{ooxml.SEPARATOR}sheet"
RELATIONSHIP = f"{ooxml.RELATIONSHIPS}{ooxml.SEPARATOR}id"
PACKAGE_RELATIONSHIP = f"{ooxml.PACKAGE_RELATIONSHIPS}{ooxml.SEPARATOR}Relationship"
# one cell as LibreOffice writes it: <c r="B1" s="1" t="e"><f aca="false">...</f><v>#VALUE!</v></c>
CELL = re.compile(rb'<c r="([A-Z]+[0-9]+)"([^>]*?)(/>|>(.*?)</c>)', re.DOTALL)
TYPE = re.compile(rb'\st="[^"]*"')
VALUE = re.compile(rb"<v>.*?</v>|<v/>|<is>.*?</is>", re.DOTALL)


def differing(source: inventory.Inventory, result: inventory.Inventory) -> dict[str, dict[bytes, Any]]:
    """``{result sheet name: {b"B1": stored value}}``: the formula cells whose result is not what the source
    stored (``source`` and ``result`` are ``inventory.Inventory`` of an .xls and its .xlsx)."""
    if source.cells is None or result.cells is None:
        return {}
    shift = 0.0
    if source.date1904 != result.date1904:
        shift = 1462.0 if source.date1904 else -1462.0
    found: dict[str, dict[bytes, Any]] = {}
    for sheet, cells in source.cells.items():
        target = sheet[:inventory.SHEET_NAME_LIMIT]
        theirs, formulas = result.cells.get(target, {}), result.formulas.get(target, set())
        for ref in formulas:
            if ref not in cells:
                continue
            value, other = cells[ref], theirs.get(ref)
            compared = value + shift if shift and isinstance(value, inventory.StoredDate) else value
            if other is None or not inventory.same_value(compared, other):
                found.setdefault(target, {})[ref] = compared
    return found


def not_numbers(result: inventory.Inventory) -> dict[str, dict[bytes, Any]]:
    """``{sheet: {ref: #NUM!}}``: the cells of the result holding a number that is none. LibreOffice writes a NaN
    or an infinity that a legacy file holds (written by other programs than Excel) as ``<v>NaN</v>``, which no
    OOXML number is: openpyxl refuses the whole workbook. The error Excel gives a number it cannot hold stands
    in its place."""
    found: dict[str, dict[bytes, Any]] = {}
    for sheet, cells in (result.cells or {}).items():
        for ref, value in cells.items():
            if type(value) is float and not math.isfinite(value):
                found.setdefault(sheet, {})[ref] = NOT_A_NUMBER
    return found


def restore(path: str | Path, source: inventory.Inventory, result: inventory.Inventory) -> int:
    """Write the stored values of :func:`differing` cells, and #NUM! in :func:`not_numbers` cells, into the .xlsx at
    ``path``; returns how many were written. The package is rewritten beside itself and replaced at once; parts
    without such cells are copied byte for byte."""
    wanted = not_numbers(result)
    for sheet, cells in differing(source, result).items():
        wanted.setdefault(sheet, {}).update(cells)
    if not wanted:
        return 0
    with zipfile.ZipFile(path) as package:
        parts = _sheet_parts(package)
        rewritten: dict[str, bytes] = {}
        written = 0
        for sheet, cells in wanted.items():
            part = parts.get(sheet)
            if part is None:
                continue
            data, count = _rewrite(ooxml.read(package, package.getinfo(part), MAX_PART), cells)
            if count:
                rewritten[part], written = data, written + count
        if not rewritten:
            return 0
        ooxml.rewrite(package, path, rewritten)
    return written


def _sheet_parts(package: zipfile.ZipFile) -> dict[str | None, str]:
    """{sheet name: part name} from the workbook and its relationships, streamed with no DTD allowed
    (``ooxml.parse``)."""
    sheets: list[tuple[str | None, str | None]] = []
    targets: dict[str | None, str] = {}

    def sheet(tag: str, attributes: dict[str, str]) -> None:
        if tag == SHEET:
            sheets.append((attributes.get("name"), attributes.get(RELATIONSHIP)))

    def relationship(tag: str, attributes: dict[str, str]) -> None:
        if tag == PACKAGE_RELATIONSHIP:
            targets[attributes.get("Id")] = attributes.get("Target", "")

    ooxml.parse(package, "xl/workbook.xml", sheet)
    ooxml.parse(package, "xl/_rels/workbook.xml.rels", relationship)
    parts: dict[str | None, str] = {}
    for name, rid in sheets:
        target = targets.get(rid, "")
        parts[name] = target.lstrip("/") if target.startswith("/") else posixpath.normpath(posixpath.join("xl", target))
    return parts


def _rewrite(data: bytes, cells: dict[bytes, Any]) -> tuple[bytes, int]:
    """(the sheet part with ``cells`` given their values, how many were changed)."""
    changed = 0

    def replace(match: re.Match[bytes]) -> bytes:
        nonlocal changed
        ref = match.group(1)
        if ref not in cells or match.group(3) == b"/>":
            return match.group(0)
        kind, text = _typed(cells[ref])
        attributes = TYPE.sub(b"", match.group(2)) + (b' t="%s"' % kind if kind else b"")
        content = VALUE.sub(b"", match.group(4)) + b"<v>" + text + b"</v>"
        changed += 1
        return b'<c r="' + ref + b'"' + attributes + b">" + content + b"</c>"

    return CELL.sub(replace, data), changed


def _typed(value: Any) -> tuple[bytes, bytes]:
    """(the ``t`` attribute, or b"" for a number; the ``<v>`` text) of a stored value."""
    if isinstance(value, inventory.ErrorValue):
        return b"e", escape(str(value)).encode()
    if isinstance(value, str):
        return b"str", escape(value).encode("utf-8")
    if isinstance(value, bool):
        return b"b", b"1" if value else b"0"
    if not math.isfinite(value):
        return b"e", NOT_A_NUMBER.encode()
    number = repr(float(value))
    return b"", (number[:-2] if number.endswith(".0") else number).encode()

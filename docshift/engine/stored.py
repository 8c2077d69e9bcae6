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

A stored result is not what Excel shows where the writer never calculated it and Excel calculates
it as it opens the file: every formula of a sheet with an UNCALCED record (Apache POI's forced
recalculation), and a FORMULA record marked to be calculated always (``fAlwaysCalc``) or on load
(the bit beside it) whose stored result is a placeholder: writers without a calculation engine mark
every formula so and store 0 (Perl's Spreadsheet::WriteExcel; Apache POI where it was not asked to
evaluate) or 4 (JExcelAPI), and write no RECALCID record, which Excel and LibreOffice write. So a
marked formula's result is a placeholder in a file without a RECALCID, and a 0 in any file. (Excel
marks volatile formulas and LibreOffice its data tables so too, with the results they calculated:
those stay.) ``settled`` leaves those cells out of the source's inventory: LibreOffice's result
stays, and the report does not compare them. OpenOffice.org's Calc marked every formula to be
calculated on load too, and wrote no RECALCID, but stored the results it calculated: a file
without a RECALCID whose marked formulas store several numbers other than 0 (``PLACEHOLDERS``)
was calculated, and its results go back, 0 as well (a FlightGear workbook's 3,370 results of
functions its macros defined, which LibreOffice calculates as #NAME?).
"""

import dataclasses
import logging
import math
import posixpath
import re
import struct
import zipfile
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import olefile

from docshift.engine import biff, inventory, ooxml, sheet_objects
from docshift.engine.embedding import ERRORS
from docshift.engine.inventory.common import MAX_PART, Unreadable, column_number
from docshift.engine.inventory.xls import NOT_A_NUMBER  # the error Excel shows for a number it cannot hold

log = logging.getLogger(__name__)
SHEET = f"{ooxml.SPREADSHEET}{ooxml.SEPARATOR}sheet"
RELATIONSHIP = f"{ooxml.RELATIONSHIPS}{ooxml.SEPARATOR}id"
PACKAGE_RELATIONSHIP = f"{ooxml.PACKAGE_RELATIONSHIPS}{ooxml.SEPARATOR}Relationship"
# one cell as LibreOffice writes it: <c r="B1" s="1" t="e"><f aca="false">...</f><v>#VALUE!</v></c>
CELL = re.compile(rb'<c r="([A-Z]+[0-9]+)"([^>]*?)(/>|>(.*?)</c>)', re.DOTALL)
TYPE = re.compile(rb'\st="[^"]*"')
VALUE = re.compile(rb"<v>.*?</v>|<v/>|<is>.*?</is>", re.DOTALL)
ROW = re.compile(rb'<row r="([0-9]+)"([^>]*?)(?:/>|>(.*?)</row>)', re.DOTALL)
REF = re.compile(rb"([A-Z]+)([0-9]+)")
SHEET_DATA_EMPTY = re.compile(rb"<sheetData\s*/>")


BIFF_FORMULA, BIFF_UNCALCED, BIFF_RECALCID = 0x0006, 0x005E, 0x01C1
CALCULATED_ON_LOAD = 0x0003  # a FORMULA record's fAlwaysCalc, and the bit beside it (Apache POI's mark)
# a writer that calculates nothing stores one placeholder for every number (0, or JExcelAPI's 4): in a file with no
# RECALCID, marked formulas that store this many different numbers other than 0 were calculated
PLACEHOLDERS = 3


def settled(path: Path, source: inventory.Inventory,
            result: inventory.Inventory) -> tuple[inventory.Inventory, dict[str, dict[bytes, Any]]]:
    """(the inventory of the .xls at ``path`` without the formula cells that LibreOffice calculated otherwise and
    whose stored result no program calculated, which Excel calculates as it opens the file, ``source`` itself where
    there are none; the cells of :func:`differing` left, for ``restore``). The file's records are read only where
    a formula's result differs."""
    found = differing(source, result)
    if not found or not olefile.isOleFile(str(path)):
        return source, found
    again: dict[str, set[bytes]] = {}
    engine = False  # whether a calculation engine wrote the file (its RECALCID, in the globals)
    marked: list[tuple[str, bytes, Any]] = []  # the cells of ``found`` whose FORMULA is marked, with their results
    results: set[float] = set()  # the numbers other than 0 that the marked FORMULA records of the file store
    try:
        for record, sheet, data, body, end in biff.records(path, {BIFF_FORMULA, BIFF_UNCALCED, BIFF_RECALCID}):
            engine = engine or record == BIFF_RECALCID
            name = (sheet or "")[:inventory.SHEET_NAME_LIMIT]
            wanted = found.get(name) if sheet is not None else None
            if record == BIFF_FORMULA and end - body >= 16 and \
                    struct.unpack_from("<H", data, body + 14)[0] & CALCULATED_ON_LOAD:
                if len(results) < PLACEHOLDERS and struct.unpack_from("<H", data, body + 12)[0] != 0xFFFF and \
                        (number := struct.unpack_from("<d", data, body + 6)[0]) != 0:  # not a string or an error
                    results.add(number)
                row, column = struct.unpack_from("<HH", data, body)
                ref = sheet_objects.cell_name(row, column).encode()
                if wanted is not None and ref in wanted:
                    marked.append((name, ref, wanted[ref]))
            elif record == BIFF_UNCALCED and wanted is not None:
                again.setdefault(name, set()).update(wanted)
    except Unreadable:
        return source, found
    except ERRORS as error:
        log.warning("the formulas of %s that Excel calculates on load are unknown: %r", path, error)
        return source, found
    calculated = len(results) >= PLACEHOLDERS  # by a program that writes no RECALCID, where the file has none
    for name, ref, value in marked:  # placeholders: a 0 where an engine wrote the file (POI's), else every result
        if (isinstance(value, float) and value == 0) if engine else not calculated:
            again.setdefault(name, set()).add(ref)
    if not again:
        return source, found
    cells = {sheet: {ref: value for ref, value in held.items()
                     if ref not in again.get(sheet[:inventory.SHEET_NAME_LIMIT], ())}
             for sheet, held in (source.cells or {}).items()}
    counts, compared = dict(source.counts), source.counts.get("cells")
    if compared is not None:  # the cells the report compares
        counts["cells"] = compared - sum(map(len, (source.cells or {}).values())) + sum(map(len, cells.values()))
    left = {sheet: {ref: value for ref, value in wanted.items() if ref not in again.get(sheet, ())}
            for sheet, wanted in found.items()}
    return dataclasses.replace(source, cells=cells, counts=counts), {sheet: kept for sheet, kept in left.items()
                                                                     if kept}


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


def missing(source: inventory.Inventory, result: inventory.Inventory) -> dict[str, dict[bytes, Any]]:
    """``{result sheet name: {b"C4": value}}``: the booleans and errors of a source whose import drops them
    (``Inventory.cells_restored``: a SpreadsheetML workbook) that its result does not hold, on the sheets it holds.
    Other values missing are only reported: where LibreOffice put a cell the reader would not, writing it would
    show it twice."""
    if not source.cells_restored or source.cells is None or result.cells is None:
        return {}
    found: dict[str, dict[bytes, Any]] = {}
    for sheet, cells in source.cells.items():
        theirs = result.cells.get(sheet[:inventory.SHEET_NAME_LIMIT])
        if theirs is not None:
            lacking = {ref: value for ref, value in cells.items()
                       if ref not in theirs and isinstance(value, (bool, inventory.ErrorValue))}
            if lacking:
                found[sheet[:inventory.SHEET_NAME_LIMIT]] = lacking
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


def restore(path: str | Path, source: inventory.Inventory, result: inventory.Inventory,
            found: dict[str, dict[bytes, Any]] | None = None) -> int:
    """Write the stored values of :func:`differing` cells (``found``, where ``settled`` has them), and #NUM! in
    :func:`not_numbers` cells, into the .xlsx at ``path``; returns how many were written. The package is rewritten
    beside itself and replaced at once; parts without such cells are copied byte for byte."""
    wanted = not_numbers(result)
    found = differing(source, result) if found is None else found
    for sheet, cells in [*found.items(), *missing(source, result).items()]:
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
            sheets.append((ooxml.xstring(attributes.get("name", "")), attributes.get(RELATIONSHIP)))

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
    """(the sheet part with ``cells`` given their values, how many were changed): a cell the part holds keeps its
    formula and style; one it does not hold is added in its row, in order (``_insert``)."""
    changed = 0
    held: set[bytes] = set()

    def replace(match: re.Match[bytes]) -> bytes:
        nonlocal changed
        ref = match.group(1)
        held.add(ref)
        if ref not in cells:
            return match.group(0)
        kind, text = typed(cells[ref])
        attributes = TYPE.sub(b"", match.group(2)) + (b' t="%s"' % kind if kind else b"")
        content = (VALUE.sub(b"", match.group(4)) if match.group(4) else b"") + b"<v>" + text + b"</v>"
        changed += 1
        return b'<c r="' + ref + b'"' + attributes + b">" + content + b"</c>"

    data = CELL.sub(replace, data)
    added = {ref: value for ref, value in cells.items() if ref not in held}
    return (_insert(data, added), changed + len(added)) if added else (data, changed)


def _insert(data: bytes, cells: dict[bytes, Any]) -> bytes:
    """The sheet part with ``cells``, which it does not hold, added: each in its row (made where the part has none),
    after the cells of lower columns, as a reader expects them in order."""
    by_row: dict[int, list[tuple[int, bytes]]] = {}
    for ref, value in cells.items():
        letters, number = REF.fullmatch(ref).groups()  # type: ignore[union-attr]  # refs the inventory made
        kind, text = typed(value)
        cell = b'<c r="' + ref + b'"' + (b' t="%s"' % kind if kind else b"") + b"><v>" + text + b"</v></c>"
        by_row.setdefault(int(number), []).append((column_number(letters), cell))

    def cells_of(row: int, existing: bytes) -> bytes:
        pieces = [(column_number(REF.fullmatch(found.group(1)).group(1)), found.group(0))  # type: ignore[union-attr]
                  for found in CELL.finditer(existing)]
        return b"".join(piece for _, piece in sorted(pieces + by_row.pop(row, []), key=lambda item: item[0]))

    def row(match: re.Match[bytes]) -> bytes:
        number = int(match.group(1))
        before = b"".join(_new_row(r, by_row.pop(r)) for r in sorted(by_row) if r < number)
        if number not in by_row:
            return before + match.group(0)
        return before + b'<row r="%d"' % number + match.group(2) + b">" + cells_of(number, match.group(3) or b"") + \
            b"</row>"

    data = SHEET_DATA_EMPTY.sub(b"<sheetData></sheetData>", data, count=1)
    data = ROW.sub(row, data)
    rest = b"".join(_new_row(r, by_row.pop(r)) for r in sorted(by_row))
    return data.replace(b"</sheetData>", rest + b"</sheetData>", 1)


def _new_row(number: int, cells: list[tuple[int, bytes]]) -> bytes:
    return b'<row r="%d">' % number + b"".join(cell for _, cell in sorted(cells, key=lambda item: item[0])) + \
        b"</row>"


def typed(value: Any) -> tuple[bytes, bytes]:
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

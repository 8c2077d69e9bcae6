"""TRUE, FALSE and errors typed into an .xls's cells, which LibreOffice's .xlsx export writes as formulas.

An .xls holds a boolean or an error typed into a cell (or pasted there as a value) as a BOOLERR record. LibreOffice
25.2's import makes each a formula cell: TRUE() or FALSE(), NA() for #N/A, and a formula of no text for any other
error. Its export writes that formula beside the value: ``<c t="e"><f aca="false"></f><v>#DIV/0!</v></c>``. So a
value became a formula, and an error other than #N/A a formula with nothing in it, which calculates to another
error: LibreOffice reading the result back shows Err:520 in each such cell, and openpyxl reads "=" (Excel writes a
typed value alone: ``<c t="e"><v>#DIV/0!</v></c>``). Of 685 workbooks of the corpus and POI's and LibreOffice's
tests, 30 held such errors (5,339 cells) and 30 such booleans (1,795 cells). A plain ``soffice`` does the same.

LibreOffice does not read an .xls formula that is one error constant either, other than ``=#N/A``: ``=#DIV/0!``
(a PtgErr token alone, as LibreOffice's own .xls export writes a formula whose expression it lost) comes out as a
formula of no text, with #N/A for its value, where the .xls stored #DIV/0!.

``mend`` takes the formula out of each cell that holds a BOOLERR in the .xls where the formula is the one
LibreOffice made of its value, so that the cell holds the value alone. A formula of no text where the .xls holds an
error constant's formula gets that constant back as its text (``stored.py`` then writes the .xls's stored value).
Any other formula of no text (an .xls formula whose expression LibreOffice did not read, a reference to a name or
a sheet that is not there) comes out too, and the cell gets the value the .xls stored for it, where LibreOffice
wrote an error of its own (#NAME?, #N/A) or another value. A formula the .xls holds (``=TRUE()``, ``=NA()``) stays.
Every other byte stays as LibreOffice wrote it.
"""

import re
import struct
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from docshift.engine import biff, sheet_objects, stored
from docshift.engine.embedding import PartEdit, edit_parts, guarded, spliced
from docshift.engine.inventory import xlsx
from docshift.engine.inventory.common import SHEET_NAME_LIMIT, ErrorValue
from docshift.engine.inventory.fidelity import same_value
from docshift.engine.inventory.package import Package
from docshift.engine.inventory.xls import XL_ERRORS

BIFF_BOOLERR, BIFF_FORMULA = 0x0205, 0x0006
PTG_ERR = 0x1C  # a formula token: one error constant
NA = 0x2A  # the error code of #N/A
BOOLEAN, ERROR, ERROR_FORMULA = "boolean", "error", "error formula"  # a BOOLERR's two kinds; a formula =#DIV/0!
# a cell whose formula LibreOffice made of a typed value, as it writes one: its reference and attributes, the formula
MADE = re.compile(rb'<c r="([A-Z]{1,3}[0-9]{1,7})"([^>]*)>(<f aca="false">(TRUE\(\)|FALSE\(\)|NA\(\)|)</f>)')
# which typed value each such formula stands for: (whether it is an error, its value), and its cell's type
VALUES = {b"TRUE()": ((BOOLEAN, 1), b'"b"'), b"FALSE()": ((BOOLEAN, 0), b'"b"'), b"NA()": ((ERROR, NA), b'"e"')}
CELL_TYPE = re.compile(rb'\st=("[a-z]+")')
VALUE = re.compile(rb"<v>([^<]*)</v>|<v/>")  # the value LibreOffice wrote after a formula
Constants = dict[str, dict[bytes, tuple[str, int]]]  # {sheet name: {b"B2": (BOOLEAN, ERROR or ERROR_FORMULA, value)}}


def mend(result: Path, source: Path, kind: str, cells: Mapping[str, Mapping[bytes, Any]] | None) -> int:
    """Take out of the .xlsx ``result`` (LibreOffice's export of the .xls ``source``) the formulas LibreOffice made
    of typed booleans and errors, and the formulas of no text. ``cells``: the .xls's cells as the inventory read them
    ({sheet: {b"B2": value}}; None where they could not be read): only a sheet holding a boolean or an error is
    looked at. Returns how many cells changed (0: the file is untouched). Never raises for what the files hold."""
    if kind != "xls":
        return 0
    if cells is None:
        sheets = None
    else:
        sheets = {name[:SHEET_NAME_LIMIT] for name, found in cells.items()
                  if any(value.__class__ is bool or value.__class__ is ErrorValue for value in found.values())}
        if not sheets:
            return 0
    held = {name[:SHEET_NAME_LIMIT]: found for name, found in (cells or {}).items()}
    return guarded(lambda result, source: _mend(result, source, sheets, held), result, source,
                   "the typed values of %s stay formulas: %r")


def _mend(result: Path, source: Path, sheets: set[str] | None, cells: Mapping[str, Mapping[bytes, Any]]) -> int:
    typed: list[Constants] = []  # the .xls's BOOLERR cells, read once a sheet has a formula they may explain

    def constants() -> Constants:
        if not typed:
            typed.append(constants_of(source))
        return typed[0]

    def parts(package: Package) -> Iterator[tuple[str, PartEdit]]:
        for _, name, part in sheet_objects.worksheets(package):
            if sheets is None or name[:SHEET_NAME_LIMIT] in sheets:
                yield part, _valuing(name[:SHEET_NAME_LIMIT], constants, cells.get(name[:SHEET_NAME_LIMIT], {}))

    return edit_parts(result, parts)


def constants_of(source: Path) -> Constants:
    """The BOOLERR cells of each sheet of the .xls ``source`` (BIFF8, or Excel 95's BIFF5, whose two records are
    laid out alike), and its formulas of one error constant."""
    found: Constants = {}
    for record, sheet, data, body, end in biff.records(source, {BIFF_BOOLERR, BIFF_FORMULA}, before_biff8=True):
        if sheet is None or end - body < 8:
            continue
        if record == BIFF_BOOLERR:
            value = (ERROR if data[body + 7] else BOOLEAN, data[body + 6])
        elif end - body >= 24 and data[body + 20:body + 23] == bytes((2, 0, PTG_ERR)):  # 2 bytes of tokens: PtgErr
            value = (ERROR_FORMULA, data[body + 23])
        else:
            continue
        row, column = struct.unpack_from("<HH", data, body)
        found.setdefault(sheet[:SHEET_NAME_LIMIT], {})[sheet_objects.cell_name(row, column).encode()] = value
    return found


def _valuing(sheet: str, constants: Callable[[], Constants], stored_values: Mapping[bytes, Any]) -> PartEdit:
    """The edit of sheet ``sheet``'s part that takes out the formulas LibreOffice made, gives an error constant's
    formula its text, and makes a formula of no text the value the .xls stored (``constants()``: the .xls's BOOLERR
    cells and such formulas, read when first asked for; ``stored_values``: the sheet's cells as the inventory read
    them)."""
    def edit(data: bytes, name: str) -> tuple[bytes, int]:
        cuts = []
        for match in MADE.finditer(data):
            typed, text = CELL_TYPE.search(match.group(2)), match.group(4)
            if typed is None:
                continue
            held = constants().get(sheet, {}).get(match.group(1)) if text or typed.group(1) == b'"e"' else None
            if text:  # made of a BOOLERR of this value, or the .xls's own formula
                value, cell_type = VALUES[text]
                if typed.group(1) == cell_type and held == value:
                    cuts.append((match.start(3), match.end(3), b""))
            elif held is not None and held[0] == ERROR_FORMULA and held[1] in XL_ERRORS:  # =#DIV/0!: its text
                cuts.append((match.start(4), match.end(4), XL_ERRORS[held[1]].encode()))
            else:  # no formula at all, whatever else the .xls holds there: its stored value, where known
                cuts.append(_stored(data, match, typed, stored_values.get(match.group(1))))
        return spliced(data, cuts), len(cuts)
    return edit


def _stored(data: bytes, match: re.Match[bytes], typed: re.Match[bytes], value: Any) -> tuple[int, int, bytes]:
    """The edit of a cell whose formula has no text: the formula out, and the value the .xls stored in place of the
    one LibreOffice wrote, unless that is unknown or the same."""
    written = VALUE.match(data, match.end(3))
    if value is None or written is None or _same(written.group(1) or b"", typed.group(1), value):
        return match.start(3), match.end(3), b""
    kind, text = stored.typed(value)
    if kind == b"str":  # a value alone, no formula's result
        kind, content = b"inlineStr", b'<is><t xml:space="preserve">' + text + b"</t></is>"
    else:
        content = b"<v>" + text + b"</v>"
    attributes = match.group(2)[:typed.start()] + (b' t="%s"' % kind if kind else b"") + match.group(2)[typed.end():]
    return match.start(2), written.end(), attributes + b">" + content


def _same(raw: bytes, cell_type: bytes, value: Any) -> bool:
    """Whether the value LibreOffice wrote (``raw``, of the cell's type, quoted) is ``value``."""
    try:
        theirs = xlsx.cell_value(cell_type.strip(b'"'), raw, [])
    except ValueError:  # a number cell of no number
        return False
    return theirs is not None and same_value(value, theirs)

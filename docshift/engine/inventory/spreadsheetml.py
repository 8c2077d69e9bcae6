"""The counts of a SpreadsheetML 2003 workbook named .xls (Excel's "XML Spreadsheet 2003", which many programs
export under .xls): its sheets, its cells with a value, its comments and the headers and footers its sheets
print, read from its XML as a stream with no DTD allowed (``ooxml.parser``).

A sheet (``Worksheet``, its ``ss:Name``) holds a ``Table`` of ``Row``s of ``Cell``s, from its ``ss:TopCell`` row
and ``ss:LeftCell`` column (1 by default; an index counts from there). A row or a cell without
``ss:Index`` follows the one before it, a row's ``ss:Span`` stands for as many rows more (as Excel's reference
says; LibreOffice's import does not skip them, so the cells of the rows after move up, and the report names them),
a cell's ``ss:MergeAcross`` covers as many cells more. A cell's value is its ``Data``, of an ``ss:Type``: Number, String
(its text, rich text's tags aside), DateTime (a day counted from 1900, as Excel stores one), Boolean or Error; a
formula cell's ``Data`` is the result Excel stored. Empty text is no value, as in an .xls. LibreOffice's import
drops the Boolean and Error cells (LibreOffice 25.2, a plain ``soffice`` too): the worker writes each cell of the
source that its result lacks back into it (``stored.restore``), unless a spanned row moved the rows after it.
"""

import math
from datetime import datetime
from pathlib import Path
from typing import Any

from docshift.engine import ooxml
from docshift.engine.inventory.common import (
    CHUNK,
    MAX_STREAM,
    Budget,
    ErrorValue,
    Inventory,
    StoredDate,
    Unreadable,
    header_shows,
)
from docshift.engine.inventory.xls import COLUMNS, MAX_CELL_TEXT, NOT_A_NUMBER

SS = "urn:schemas-microsoft-com:office:spreadsheet"
X = "urn:schemas-microsoft-com:office:excel"
SEP = ooxml.SEPARATOR
WORKBOOK, WORKSHEET, TABLE, ROW, CELL, DATA, COMMENT = (
    f"{SS}{SEP}{name}" for name in ("Workbook", "Worksheet", "Table", "Row", "Cell", "Data", "Comment"))
HEADERS = {f"{X}{SEP}Header", f"{X}{SEP}Footer"}
NAME, INDEX, SPAN, ACROSS, TYPE, TOP, LEFT = (
    f"{SS}{SEP}{name}" for name in ("Name", "Index", "Span", "MergeAcross", "Type", "TopCell", "LeftCell"))
X_DATA = f"{X}{SEP}Data"
EPOCH = datetime(1899, 12, 30)  # day 0 of Excel's 1900 date system, as a serial number counts it
HEAD = 4096  # bytes looked at for the namespace of a SpreadsheetML workbook
MAX_ROWS, MAX_COLUMNS = 1 << 20, len(COLUMNS)
# elements open at once, at most: a workbook nests about eight (rich text a few more); 4 MB of nothing but "<a>"
# held 226 MB of the worker in expat before this bound
MAX_NESTING = 256


def is_spreadsheetml(path: str | Path) -> bool:
    with open(path, "rb") as f:
        head = f.read(HEAD)
    return head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<?xml") and SS.encode() in head


def read(path: str | Path, inventory: Inventory, budget: Budget) -> None:
    """The counts of the SpreadsheetML workbook ``path``; what cannot be read stays unknown."""
    sheets: list[str] = []
    cells: dict[str, dict[bytes, Any]] = {}
    # where the reader is: the sheet's table offset, the row and its span, the cell and its merge, the Data being
    # read (its type, its text), inside a comment; what is counted beside the cells; whether a span moved rows
    state: dict[str, Any] = {"root": None, "top": 0, "left": 0, "row": 0, "span": 0, "column": 0, "across": 0,
                             "type": None, "text": None, "comment": False, "comments": 0, "headers": 0,
                             "diverged": False, "depth": 0}

    def start(tag: str, attributes: dict[str, str]) -> None:
        state["depth"] += 1
        if state["depth"] > MAX_NESTING:
            raise Unreadable("SpreadsheetML elements nested too deep")
        if state["root"] is None:
            state["root"] = tag
            if tag != WORKBOOK:
                raise Unreadable("no SpreadsheetML workbook")
        if tag == WORKSHEET:
            budget.spend()
            sheets.append(attributes.get(NAME, ""))
            cells.setdefault(sheets[-1], {})
            state["row"] = state["span"] = state["top"] = state["left"] = 0
        elif tag == TABLE:  # where the table's first row and column are on the sheet
            state["top"], state["left"] = _count(attributes.get(TOP), 1) - 1, _count(attributes.get(LEFT), 1) - 1
            state["row"] = state["top"]
        elif tag == ROW:
            budget.spend()
            if state["span"] and INDEX not in attributes:
                state["diverged"] = True  # LibreOffice puts this row right after the spanned one
            state["row"] = _index(attributes, state["row"] + 1, state["top"], MAX_ROWS)
            state["column"], state["span"] = state["left"], _count(attributes.get(SPAN))
        elif tag == CELL:
            state["column"] = _index(attributes, state["column"] + 1, state["left"], MAX_COLUMNS)
            state["across"] = _count(attributes.get(ACROSS))
        elif tag == DATA and state["type"] is None and not state["comment"] and sheets and state["column"]:
            state["type"], state["text"] = attributes.get(TYPE, "String"), []
        elif tag == COMMENT:
            state["comments"] += 1
            state["comment"] = True
        elif tag in HEADERS and header_shows(attributes.get(X_DATA, "")):
            state["headers"] += 1

    def end(tag: str) -> None:
        state["depth"] -= 1
        if tag == DATA and state["type"] is not None:
            value = _value(state["type"], "".join(state["text"]))
            if value is not None:
                cells[sheets[-1]][COLUMNS[state["column"] - 1] + b"%d" % state["row"]] = value
            state["type"] = state["text"] = None
        elif tag == COMMENT:
            state["comment"] = False
        elif tag == CELL:
            state["column"] = min(state["column"] + state["across"], MAX_COLUMNS)
        elif tag == ROW:
            state["row"] = min(state["row"] + state["span"], MAX_ROWS)

    def text(data: str) -> None:
        if state["text"] is not None:
            state["text"].append(data)

    with open(path, "rb") as f:
        reader = ooxml.parser(Path(path).name, Unreadable, start, end, text)
        ooxml.feed(reader, _chunks(f), Path(path).name, Unreadable)
    inventory.sheets, inventory.cells = sheets, cells
    inventory.cells_restored = not state["diverged"]
    inventory.counts.update(sheets=len(sheets), cells=sum(len(found) for found in cells.values()),
                            comments=state["comments"], headers_footers=state["headers"], images=0, charts=0,
                            embedded_objects=0)


def _chunks(f: Any) -> Any:
    """The file a chunk at a time, the spaces before its XML declaration left out (which LibreOffice reads past)."""
    left, first = MAX_STREAM, True
    while chunk := f.read(min(CHUNK, left + 1)):
        left -= len(chunk)
        if left < 0:
            raise Unreadable("SpreadsheetML workbook too large")
        if first:
            chunk, first = chunk.lstrip(b"\xef\xbb\xbf \t\r\n"), False
        yield chunk


def _index(attributes: dict[str, str], following: int, offset: int, limit: int) -> int:
    """A row's or a cell's number on the sheet: its ``ss:Index`` in its table (``offset`` rows or columns down or
    right), or the one after the last; at most ``limit``."""
    given = attributes.get(INDEX)
    number = offset + int(given) if given and given.isdigit() else following
    return max(1, min(number, limit))


def _count(value: str | None, default: int = 0) -> int:
    return min(int(value), MAX_ROWS) if value and value.isdigit() else default


def _value(kind: str, text: str) -> Any:
    """A cell's value as an .xls's reader gives it, or None for none."""
    if kind == "Number":
        try:
            number = float(text)
        except ValueError:
            return None
        return number if math.isfinite(number) else NOT_A_NUMBER
    if kind == "DateTime":
        try:
            moment = datetime.fromisoformat(text.strip()[:26])
        except ValueError:
            return text or None  # Excel keeps a date it cannot read as its text
        return StoredDate((moment - EPOCH).total_seconds() / 86400)
    if kind == "Boolean":
        return text.strip() not in ("", "0")
    if kind == "Error":
        return ErrorValue(text.strip()) if text.strip() else None
    return text[:MAX_CELL_TEXT] or None

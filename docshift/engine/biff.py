"""The records of an .xls's Workbook stream that the mends read: the workbook globals' and each sheet's own.

Six mends and the stored results' check each read some records of the same file. The stream is read and its
records indexed by type once (``_indexed``, kept for the last few files; ``index`` does it ahead, while LibreOffice
converts the file), and each reader then visits only the records of its types, in the stream's order.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import struct
from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import olefile

from docshift.engine.cfb import CompoundFile
from docshift.engine.inventory.common import Budget, Unreadable, biff_string, code_page, stream
from docshift.engine.inventory.xls import BIFF_BOF, BIFF_BOUNDSHEET, BIFF_CODEPAGE, BIFF_EOF

# the records of one cell each, which begin with its row, column and XF ([MS-XLS] 2.4): FORMULA, RSTRING, LABELSST,
# BLANK, NUMBER, LABEL, BOOLERR, RK
CELLS = {0x0006, 0x00D6, 0x00FD, 0x0201, 0x0203, 0x0204, 0x0205, 0x027E}
MULTIPLE = {0x00BD: 6, 0x00BE: 2}  # MULRK's and MULBLANK's: each cell's bytes, its XF first, after a row and column
T = TypeVar("T")
INDEXED = 2  # files whose records are kept indexed: a conversion's, and the one beside it on the other core


@dataclass
class _Index:
    """A Workbook stream, its sheets' names and its records by type: where each one's body starts and ends and its
    sheet (0: the globals, n: the nth name), 12 bytes a record; ``cut``: the record budget ran out before the
    stream's end."""
    data: bytes = b""
    names: list[str] = field(default_factory=list)
    by_type: dict[int, tuple[array[int], array[int], array[int]]] = field(default_factory=dict)
    cut: bool = False


def records(source: Path, types: set[int],
            before_biff8: bool = False) -> Iterator[tuple[int, str | None, bytes, int, int]]:
    """Each record of ``types`` of the .xls ``source`` (BIFF8; BIFF5 too where ``before_biff8``, for records whose
    layout the two share) that is the workbook globals' or a sheet's own (not a chart's inside a sheet): (its type;
    None in the globals, else the sheet's name as its BOUNDSHEET gives it; the stream, and where the record's body
    starts and ends in it), in the stream's order. Past the record budget, ``Unreadable``."""
    status = source.stat()
    index = _indexed(str(source), status.st_size, status.st_mtime_ns, before_biff8)
    kinds = [(kind, index.by_type[kind]) for kind in types if kind in index.by_type]
    for body, rec_type, sheet, end in heapq.merge(*(zip(bodies, itertools.repeat(kind), sheets, ends)
                                                    for kind, (bodies, ends, sheets) in kinds)):
        yield rec_type, index.names[sheet - 1] if sheet else None, index.data, body, end
    if index.cut:
        raise Unreadable("record budget exceeded")


def before_biff8(source: Path) -> bool:
    """Whether the .xls ``source``'s stream is an Excel 5 or 95 workbook's (BIFF5): a Book stream, or a Workbook
    stream whose first BOF says so. A BIFF8 workbook's records, which the mends read, are indexed once: they are
    not indexed again to tell."""
    status = source.stat()
    if _indexed(str(source), status.st_size, status.st_mtime_ns, False).data:
        return False
    data = _indexed(str(source), status.st_size, status.st_mtime_ns, True).data
    if len(data) < 8:
        return False
    first, _, version = struct.unpack_from("<HHH", data, 0)
    return first == 0x0809 and version == 0x0500


def index(source: Path) -> None:
    """Index the records of the .xls ``source`` now, for the readers to come (``records``): the conversion's
    worker reads them after LibreOffice's export, and indexes them while LibreOffice converts."""
    status = source.stat()
    _indexed(str(source), status.st_size, status.st_mtime_ns, False)


@functools.lru_cache(maxsize=INDEXED)
def _indexed(source: str, _size: int, _modified: int, before_biff8: bool) -> _Index:
    """The records of the .xls at ``source`` (as it is at that size and time) by type, those of nested substreams
    (charts in a sheet) left out."""
    if not olefile.isOleFile(source):  # a BIFF2-4 stream alone, SpreadsheetML, HTML: no records to read
        return _Index()
    with CompoundFile(Path(source)) as ole:
        data = stream(ole, "Workbook")
        if data is None and before_biff8:
            data = stream(ole, "Book")
    if data is None or len(data) < 8 or struct.unpack_from("<H", data, 0)[0] not in BIFF_BOF:
        return _Index()
    first, _, version = struct.unpack_from("<HHH", data, 0)
    biff8 = first == 0x0809 and version == 0x0600
    if not (biff8 or before_biff8):
        return _Index()
    index = _Index(data)
    budget, names, codepage = Budget(), index.names, "cp1252"
    depth, substream, pos = 0, -1, 0
    while pos + 4 <= len(data):
        rec_type, length = struct.unpack_from("<HH", data, pos)
        body, pos = pos + 4, pos + 4 + length
        if pos > len(data):
            break
        try:
            budget.spend()
        except Unreadable:
            index.cut = True
            break
        if rec_type in BIFF_BOF:
            depth += 1
            substream += depth == 1
        elif rec_type == BIFF_EOF:
            depth -= 1
        elif rec_type == BIFF_BOUNDSHEET and depth == 1 and substream == 0 and length >= 8:
            names.append(biff_string(data, body + 6, pos, biff8, codepage))
        elif rec_type == BIFF_CODEPAGE and depth == 1 and substream == 0 and length >= 2:
            codepage = code_page(struct.unpack_from("<H", data, body)[0])
        elif depth == 1 and substream <= len(names):
            bodies, ends, sheets = index.by_type.setdefault(rec_type, (array("I"), array("I"), array("I")))
            bodies.append(body)
            ends.append(pos)
            sheets.append(max(substream, 0))
    return index


def cell_xfs(source: Path, kinds: set[int] = CELLS | set(MULTIPLE)) -> Iterator[tuple[str, int, int, int]]:
    """(its sheet's name, its row, its column, its XF) of each cell of the .xls ``source`` (BIFF8) whose record is
    of ``kinds`` (of ``CELLS`` and ``MULTIPLE``), in the stream's order."""
    for _, sheet, row, column, xf in typed_cells(source, kinds):
        yield sheet, row, column, xf


def typed_cells(source: Path, kinds: set[int] = CELLS | set(MULTIPLE)) -> Iterator[tuple[int, str, int, int, int]]:
    """``cell_xfs``, each cell with the type of its record first."""
    for rec_type, sheet, data, body, end in records(source, kinds):
        if sheet is None or end - body < 6:
            continue
        row, column = struct.unpack_from("<HH", data, body)
        if rec_type in MULTIPLE:
            step = MULTIPLE[rec_type]
            for at in range(body + 4, end - 2 - step + 1, step):  # the last column follows the cells
                yield rec_type, sheet, row, column, struct.unpack_from("<H", data, at)[0]
                column += 1
        elif rec_type in CELLS:
            yield rec_type, sheet, row, column, struct.unpack_from("<H", data, body + 4)[0]


def cells_of(source: Path, kinds: set[int], given: Mapping[int, T]) -> dict[str, dict[tuple[int, int], T]]:
    """{sheet name (its first 31 characters): {(row, column): ``given[xf]``}} of each cell of ``kinds`` of the .xls
    ``source`` whose XF ``given`` names (``cell_xfs``); {} where ``given`` is empty."""
    found: dict[str, dict[tuple[int, int], T]] = {}
    if given:
        for sheet, row, column, xf in cell_xfs(source, kinds):
            if (value := given.get(xf)) is not None:
                found.setdefault(sheet[:31], {})[(row, column)] = value
    return found

"""The records of an .xls's Workbook stream that the mends read: the workbook globals' and each sheet's own."""

import struct
from collections.abc import Iterator
from pathlib import Path

import olefile

from docshift.engine.cfb import CompoundFile
from docshift.engine.inventory.common import Budget, code_page, stream
from docshift.engine.inventory.xls import BIFF_BOF, BIFF_BOUNDSHEET, BIFF_CODEPAGE, BIFF_EOF, _string


def records(source: Path, types: set[int],
            before_biff8: bool = False) -> Iterator[tuple[int, str | None, bytes, int, int]]:
    """Each record of ``types`` of the .xls ``source`` (BIFF8; BIFF5 too where ``before_biff8``, for records whose
    layout the two share) that is the workbook globals' or a sheet's own (not a chart's inside a sheet): (its type;
    None in the globals, else the sheet's name as its BOUNDSHEET gives it; the stream, and where the record's body
    starts and ends in it), in the stream's order."""
    if not olefile.isOleFile(str(source)):  # a BIFF2-4 stream alone, SpreadsheetML, HTML: no records to read
        return
    with CompoundFile(source) as ole:
        data = stream(ole, "Workbook")
        if data is None and before_biff8:
            data = stream(ole, "Book")
    if data is None or len(data) < 8 or struct.unpack_from("<H", data, 0)[0] not in BIFF_BOF:
        return
    first, _, version = struct.unpack_from("<HHH", data, 0)
    biff8 = first == 0x0809 and version == 0x0600
    if not (biff8 or before_biff8):
        return
    budget, names, codepage = Budget(), [], "cp1252"
    depth, substream, pos = 0, -1, 0
    while pos + 4 <= len(data):
        rec_type, length = struct.unpack_from("<HH", data, pos)
        body, pos = pos + 4, pos + 4 + length
        if pos > len(data):
            break
        budget.spend()
        if rec_type in BIFF_BOF:
            depth += 1
            substream += depth == 1
        elif rec_type == BIFF_EOF:
            depth -= 1
        elif rec_type == BIFF_BOUNDSHEET and depth == 1 and substream == 0 and length >= 8:
            names.append(_string(data, body + 6, pos, biff8, codepage))
        elif rec_type == BIFF_CODEPAGE and depth == 1 and substream == 0 and length >= 2:
            codepage = code_page(struct.unpack_from("<H", data, body)[0])
        elif rec_type in types and depth == 1 and substream <= len(names):
            yield rec_type, names[substream - 1] if substream > 0 else None, data, body, pos

"""An Excel 2.x-4.0 worksheet named .xls (``docshift/engine/inventory/biff4.py``): a bare stream of BIFF2-4 records
with no compound file, whose report counted nothing until its sheet and cells were read.

Made here: a BIFF2 worksheet of numbers and labels, written record by record as Excel 2.1 wrote them.
"""

import struct
import zipfile

import pytest

from docshift.engine import convert
from docshift.engine.inventory import biff4, of_result, of_source, report

CELLS = [(0, 0, "Region"), (0, 1, "Sales"), (1, 0, "North"), (1, 1, 1250.5), (2, 0, "Süd"), (2, 1, 980.0)]


def biff2(cells, bof: bytes = struct.pack("<HHHH", 0x0009, 4, 0x0002, biff4.WORKSHEET)) -> bytes:
    """A worksheet of BIFF2 records: BOF (or ``bof``), a NUMBER or LABEL per cell, EOF."""
    out = bof
    for row, column, value in cells:
        if isinstance(value, float):
            out += struct.pack("<HHHH3sd", 0x0003, 15, row, column, b"\0\0\0", value)
        else:
            text = value.encode("cp1252")
            out += struct.pack("<HHHH3sB", 0x0004, 8 + len(text), row, column, b"\0\0\0", len(text)) + text
    return out + struct.pack("<HH", 0x000A, 0)


@pytest.fixture
def worksheet(tmp_path):
    path = tmp_path / "sales.xls"
    path.write_bytes(biff2(CELLS))
    return path


def test_the_sheet_and_its_cells_are_counted(worksheet, tmp_path):
    """A BIFF2 worksheet's sheet is named after the file, as LibreOffice names it; a BIFF4 one's Sheet1."""
    assert biff4.is_worksheet(worksheet)
    holds = of_source(worksheet, "xls")
    assert holds.sheets == ["sales"] and holds.counts["sheets"] == 1 and holds.counts["cells"] == len(CELLS)
    assert holds.cells == {"sales": {b"A1": "Region", b"B1": "Sales", b"A2": "North", b"B2": 1250.5, b"A3": "Süd",
                                     b"B3": 980.0}}
    biff4_file = tmp_path / "four.xls"  # BIFF4's BOF: its version, the worksheet, a build
    biff4_file.write_bytes(biff2(CELLS, struct.pack("<HHHHH", 0x0409, 6, 0, biff4.WORKSHEET, 0)))
    assert biff4.is_worksheet(biff4_file) and of_source(biff4_file, "xls").sheets == ["Sheet1"]


def test_the_report_compares_the_cells_of_the_result(office, worksheet, tmp_path):
    """LibreOffice keeps every cell, in a sheet it names after the file: the report counts them equal; a result whose
    value changed is named."""
    converted = convert.convert(office, worksheet, "xls", tmp_path / "work", 60)
    assert converted.fidelity["counts"]["cells"] == {"source": len(CELLS), "result": len(CELLS)}
    assert converted.fidelity["counts"]["sheets"] == {"source": 1, "result": 1}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]
    changed = tmp_path / "changed.xlsx"
    with zipfile.ZipFile(converted.path) as original, zipfile.ZipFile(changed, "w") as out:
        for item in original.infolist():
            data = original.read(item)
            if item.filename == "xl/worksheets/sheet1.xml":
                assert b"<v>1250.5</v>" in data
                data = data.replace(b"<v>1250.5</v>", b"<v>1205.5</v>")
            out.writestr(item, data)
    lost = report(of_source(worksheet, "xls"), of_result(changed, "xls"))
    assert lost["complete"] is False
    assert [entry["detail"] for entry in lost["lost"]] == [
        "1 cell value differs from the source; first: sheet 'sales' B2"]  # LibreOffice names it after the file

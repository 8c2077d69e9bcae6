"""Excel 4.0 macro sheets (``macro_sheets`` of the fidelity report): LibreOffice's export writes each as a worksheet,
its macro functions as ``#NAME?``, and a plain ``soffice`` does the same; the report says so.

Made here: an .xls of two sheets that LibreOffice saved, whose second BOUNDSHEET record is then marked a macro
sheet (``dt`` 1), as Excel writes one.
"""

import struct

import olefile
import openpyxl
import pytest
from workbooks import saved_as_xls

from docshift.contract import Macros
from docshift.engine import convert, inventory

BOUNDSHEET = 0x0085


@pytest.fixture(scope="module")
def macro_sheet_xls(tmp_path_factory):
    out = tmp_path_factory.mktemp("macro-sheet")
    book = openpyxl.Workbook()
    book.active.title = "Data"
    book.active["A1"] = 42
    book.create_sheet("Macro1")["A1"] = "=1+1"
    path = saved_as_xls(book, out, "macros")
    with olefile.OleFileIO(str(path), write_mode=True) as ole:
        data = bytearray(ole.openstream("Workbook").read())
        at, sheets = 0, []
        while at + 4 <= len(data) and len(sheets) < 2:
            rec_type, length = struct.unpack_from("<HH", data, at)
            if rec_type == BOUNDSHEET:
                sheets.append(at + 4)
            at += 4 + length
        data[sheets[1] + 5] = 1  # BoundSheet8.dt: a macro sheet
        ole.write_stream("Workbook", bytes(data))
    return path


def test_a_macro_sheet_kept_as_a_worksheet_is_named_in_the_report(office, macro_sheet_xls, tmp_path):
    held = inventory.of_source(macro_sheet_xls, "xls")
    assert held.counts["macro_sheets"] == 1 and held.where["macro_sheets"] == ["sheet 'Macro1'"]
    converted = convert.convert(office, macro_sheet_xls, "xls", tmp_path / "keep", 60)
    assert openpyxl.load_workbook(converted.path).sheetnames == ["Data", "Macro1"]  # a worksheet now
    report = converted.fidelity
    assert report["counts"]["macro_sheets"] == {"source": 1, "result": 0}
    assert report["complete"] is False
    assert [(loss["what"], loss["count"]) for loss in report["lost"]] == [("macro_sheets", 1)]
    assert "sheet 'Macro1'" in report["lost"][0]["detail"] and "worksheet" in report["lost"][0]["detail"]


def test_macros_removed_on_request_take_the_macro_sheets_with_them(office, macro_sheet_xls, tmp_path):
    report = convert.convert(office, macro_sheet_xls, "xls", tmp_path / "remove", 60, macros=Macros.REMOVE).fidelity
    assert report["complete"] is True
    assert [(loss["what"], loss["count"]) for loss in report["lost"]] == [("macro_sheets", 1)]
    assert "removed on request" in report["lost"][0]["detail"]


def test_a_workbook_without_macro_sheets_counts_none(office, tmp_path):
    book = openpyxl.Workbook()
    book.active["A1"] = 1
    source = saved_as_xls(book, tmp_path, "plain")
    report = convert.convert(office, source, "xls", tmp_path / "work", 60).fidelity
    assert report["counts"]["macro_sheets"] == {"source": 0, "result": 0} and report["complete"] is True

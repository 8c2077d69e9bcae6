"""A defined name whose formula is an error constant (``docshift/engine/sheet_name_errors.py``): LibreOffice writes
it with no formula; docshift with the .xls's constant.

Made here: a workbook with a print area saved by LibreOffice as an .xls, its Print_Area's formula then made
``=#REF!`` (one PtgErr), as gnumeric writes a print area whose range is gone.
"""

import re
import struct
import zipfile

import openpyxl
import pytest
from conftest import _soffice_save as soffice
from workbooks import record, rewritten, saved_as_xls, with_workbook_stream

from docshift.engine import convert, sheet_name_errors

NAMES = re.compile(r"<definedName[^>]*>[^<]*</definedName>")


def to_ref_error(rec_type: int, body: bytes, _: int) -> bytes | None:
    """The built-in NAME record with the error constant #REF! as its formula in place of its own; LibreOffice's
    second name of the print area, left out."""
    if rec_type != 0x0018:
        return None
    if not body[0] & 0x20:
        return b""
    length, wide = body[3], body[14] & 1
    formula = 15 + length * (2 if wide else 1)
    return record(rec_type, body[:4] + struct.pack("<H", 2) + body[6:formula] + bytes([0x1C, 0x17]))


@pytest.fixture(scope="module")
def print_area_xls(tmp_path_factory):
    out = tmp_path_factory.mktemp("names")
    book = openpyxl.Workbook()
    book.active.title = "Data"
    book.active["A1"] = 1
    book.active.print_area = "A1:B2"
    saved = saved_as_xls(book, out, "area")
    return with_workbook_stream(saved, lambda stream: rewritten(stream, to_ref_error), out / "gone.xls")


def names(path):
    with zipfile.ZipFile(path) as package:
        return NAMES.findall(package.read("xl/workbook.xml").decode())


def test_the_error_constant_is_read(print_area_xls):
    assert sheet_name_errors.errors_of(print_area_xls) == {(0, "Excel_BuiltIn_Print_Area"): "#REF!"}


def test_a_name_of_an_error_keeps_it(office, print_area_xls, tmp_path):
    """A plain soffice writes the print area with no formula; docshift gives it #REF!, every other byte as it was."""
    plain = names(soffice(print_area_xls, "xlsx", tmp_path / "plain"))
    empty = [name for name in plain if 'name="Excel_BuiltIn_Print_Area"' in name]
    assert empty and all(name.endswith("></definedName>") for name in empty)
    converted = convert.convert(office, print_area_xls, "xls", tmp_path / "work", 60)
    assert names(converted.path) == [name.replace("></definedName>", ">#REF!</definedName>")
                                     if name in empty else name for name in plain]
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]
    openpyxl.load_workbook(converted.path)


def test_a_name_that_is_no_error_stays_empty(print_area_xls, tmp_path):
    """Only a name the .xls gives an error constant is filled, a self-closing one too; a workbook without empty
    names is untouched."""
    main = ('<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><definedNames>'
            '<definedName localSheetId="0" name="Other"></definedName>'
            '<definedName localSheetId="1" name="Excel_BuiltIn_Print_Area"/>'
            '<definedName localSheetId="0" name="Excel_BuiltIn_Print_Area"/></definedNames></workbook>')
    path = tmp_path / "book.xlsx"
    with zipfile.ZipFile(path, "w") as package:
        package.writestr("xl/workbook.xml", main)
    assert sheet_name_errors.mend(path, print_area_xls, "xls") == 1
    assert names(path) == ['<definedName localSheetId="0" name="Other"></definedName>',
                           '<definedName localSheetId="0" name="Excel_BuiltIn_Print_Area">#REF!</definedName>']
    before = path.read_bytes()
    assert sheet_name_errors.mend(path, print_area_xls, "xls") == 0 and path.read_bytes() == before
    assert sheet_name_errors.mend(path, print_area_xls, "doc") == 0

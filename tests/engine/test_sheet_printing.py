"""How a workbook's sheets print: comments where they show, black and white, errors blank. LibreOffice's model keeps
"print comments" only; the result gets the rest back from the .xls's SETUP records."""

import re
import struct
import zipfile

import pytest
from conftest import _soffice_save as soffice
from workbooks import records, sheets_of, two_sheets

from docshift.engine import convert, inventory, sheet_printing
from docshift.engine.inventory.package import NS_R, NS_S
from docshift.engine.inventory.xls_views import BIFF_SETUP, NO_COLOUR, NOTES

BLANK_ERRORS = 1 << 10  # Setup's iErrors 1


def printed_so(stream):
    """The Workbook ``stream`` whose first sheet's SETUP prints its comments as they show, in black and white, and
    its errors blank; its second sheet's as LibreOffice wrote it."""
    data = bytearray(stream)
    setups = [pos for pos, rec_type, length in records(stream) if rec_type == BIFF_SETUP and length >= 12]
    assert len(setups) == 2
    flags = struct.unpack_from("<H", data, setups[0] + 14)[0]
    struct.pack_into("<H", data, setups[0] + 14, flags | NOTES | NO_COLOUR | BLANK_ERRORS)
    return bytes(data)


@pytest.fixture(scope="module")
def printed(tmp_path_factory):
    return two_sheets(tmp_path_factory.mktemp("printing"), ("Claims", "Notes"), "of:=1/0", printed_so, "printed.xls")


def page_setups(result):
    """[the attributes of each sheet's ``pageSetup``] of the .xlsx ``result``, in its sheets' order."""
    return [dict(re.findall(r'(\w+)="([^"]*)"', re.search(r"<pageSetup [^>]*>", sheet).group()))
            for sheet in sheets_of(result)]


def test_the_xls_says_how_its_sheets_print(printed):
    assert inventory.of_source(printed, "xls").printing == {
        "Claims": {"cellComments": "asDisplayed", "blackAndWhite": "true", "errors": "blank"}}


def test_a_sheet_prints_as_the_xls_says(office, printed, tmp_path):
    """A plain soffice's .xlsx prints the first sheet's comments at the end, in colour, its errors as shown;
    docshift's as the .xls says, and its second sheet as LibreOffice wrote it."""
    plain = page_setups(soffice(printed, "xlsx", tmp_path / "plain"))
    assert [plain[0].get(key) for key in ("cellComments", "blackAndWhite", "errors")] == ["atEnd", "false", None]
    converted = page_setups(convert.convert(office, printed, "xls", tmp_path / "work", 60).path)
    assert converted[0] == {**plain[0], "cellComments": "asDisplayed", "blackAndWhite": "true", "errors": "blank"}
    assert converted[1] == plain[1]


def test_only_what_differs_is_written(tmp_path):
    """Attributes already as wanted stay byte for byte; a sheet without ``pageSetup`` is left as it is."""
    result = tmp_path / "book.xlsx"
    with zipfile.ZipFile(result, "w") as package:
        package.writestr("xl/workbook.xml", f'<workbook xmlns="{NS_S}" xmlns:r="{NS_R}"><sheets>'
                         '<sheet name="A" r:id="rId1"/><sheet name="B" r:id="rId2"/></sheets></workbook>')
        package.writestr("xl/_rels/workbook.xml.rels", '<Relationships xmlns="http://schemas.openxmlformats.org/'
                         'package/2006/relationships"><Relationship Id="rId1" Target="worksheets/sheet1.xml"/>'
                         '<Relationship Id="rId2" Target="worksheets/sheet2.xml"/></Relationships>')
        package.writestr("xl/worksheets/sheet1.xml", f'<worksheet xmlns="{NS_S}"><pageSetup draft="true" '
                         'cellComments="atEnd"/></worksheet>')
        package.writestr("xl/worksheets/sheet2.xml", f'<worksheet xmlns="{NS_S}"/>')
    assert sheet_printing.mend(result, "xls", {"A": {"draft": "true"}, "B": {"draft": "true"}}) == 0
    assert sheet_printing.mend(result, "xls", {"A": {"draft": "true", "cellComments": "asDisplayed"}}) == 1
    with zipfile.ZipFile(result) as package:
        assert package.read("xl/worksheets/sheet1.xml").decode().endswith(
            '<pageSetup draft="true" cellComments="asDisplayed"/></worksheet>')

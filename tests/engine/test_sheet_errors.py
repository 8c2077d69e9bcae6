"""Cells whose errors the author told Excel not to flag (numbers stored as text): LibreOffice's import drops the
.xls's FEAT records, and the result gets them back as ``ignoredErrors``."""

import re
import struct
import zipfile

import pytest
from conftest import _soffice_save as soffice
from conftest import flat_odf
from workbooks import records, with_workbook_stream

from docshift.engine import convert, inventory, sheet_errors
from docshift.engine.inventory.common import Ignored
from docshift.engine.inventory.package import NS_MC, NS_S
from docshift.engine.inventory.xls import BIFF_EOF
from docshift.engine.inventory.xls_views import BIFF_FEAT, ISFFEC2

NUMBER_AS_TEXT = 0x04  # FFErrorCheck's ffecNumStoredAsText


def feature(ranges, checks):
    """A FEAT record of ISFFEC2 ([MS-XLS] 2.4.112): its FrtHeader, isf, the Ref8U ``ranges`` and the
    FeatFormulaErr2 of ``checks``."""
    body = struct.pack("<HH8xHBIHIH", BIFF_FEAT, 0, ISFFEC2, 0, 0, len(ranges), 4, 0)
    body += b"".join(struct.pack("<4H", *cells) for cells in ranges) + struct.pack("<I", checks)
    return struct.pack("<HH", BIFF_FEAT, len(body)) + body


def not_flagged(stream):
    """The Workbook ``stream`` of one sheet whose A1:A3 and C5 Excel is not to flag as numbers stored as text (a
    FEAT record before the sheet's EOF: the globals' offsets of the sheet stay right)."""
    data = bytes(stream)
    eofs = [pos for pos, rec_type, _ in records(data) if rec_type == BIFF_EOF]
    assert len(eofs) == 2
    return data[:eofs[1]] + feature([(0, 2, 0, 0), (4, 4, 2, 2)], NUMBER_AS_TEXT) + data[eofs[1]:]


@pytest.fixture(scope="module")
def codes(tmp_path_factory):
    out = tmp_path_factory.mktemp("errors")
    row = '<table:table-row><table:table-cell office:value-type="string"><text:p>0012{}</text:p></table:table-cell>' \
          '</table:table-row>'
    sheet = f'<table:table table:name="Codes">{"".join(row.format(n) for n in range(3))}</table:table>'
    (out / "codes.fods").write_text(flat_odf("spreadsheet", sheet))
    return with_workbook_stream(soffice(out / "codes.fods", "xls", out), not_flagged, out / "flagged.xls")


def ignored_errors(result):
    with zipfile.ZipFile(result) as package:
        sheet = package.read("xl/worksheets/sheet1.xml").decode()
    found = re.search(r"<ignoredErrors>.*</ignoredErrors>", sheet)
    return found and (found.group(), sheet)


def test_the_xls_says_which_errors_not_to_flag(codes):
    assert inventory.of_source(codes, "xls").ignored == {
        "Codes": [Ignored(((0, 2, 0, 0), (4, 4, 2, 2)), ("numberStoredAsText",))]}


def test_the_errors_not_to_flag_are_kept(office, codes, tmp_path):
    """A plain soffice's .xlsx has no ``ignoredErrors`` (Excel flags the codes); docshift's has them, after the
    sheet's page setup and header and footer, where the schema puts them."""
    assert ignored_errors(soffice(codes, "xlsx", tmp_path / "plain")) is None
    written, sheet = ignored_errors(convert.convert(office, codes, "xls", tmp_path / "work", 60).path)
    assert written == '<ignoredErrors><ignoredError sqref="A1:A3 C5" numberStoredAsText="1"/></ignoredErrors>'
    assert sheet.index("<pageSetup") < sheet.index("<headerFooter") < sheet.index(written)


@pytest.mark.parametrize("prefix", ["", "x:"])
def test_ignored_errors_go_before_the_drawing_in_the_part_s_prefix(prefix):
    """Before the first child that follows ``ignoredErrors`` (a drawing, objects in markup compatibility), in the
    part's prefix; a sheet that has ``ignoredErrors`` already is left as it is."""
    declared = f'xmlns{":x" if prefix else ""}="{NS_S}"'
    head = f'<?xml version="1.0"?>\n<{prefix}worksheet {declared} xmlns:mc="{NS_MC}"><{prefix}pageMargins/>'
    tail = f'<mc:AlternateContent/><{prefix}drawing/></{prefix}worksheet>'
    records = [Ignored(((1, 1, 27, 27),), ("formula", "evalError"))]
    edited = sheet_errors.ignoring((head + tail).encode(), "sheet1.xml", records)
    assert edited.decode() == head + f'<{prefix}ignoredErrors><{prefix}ignoredError sqref="AB2" formula="1" ' \
        f'evalError="1"/></{prefix}ignoredErrors>' + tail
    assert sheet_errors.ignoring(edited, "sheet1.xml", records) == edited

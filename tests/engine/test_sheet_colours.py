"""The colours Excel 2007 and later give an .xls's cells (XFEXT records: theme colours with tints, RGB), which
LibreOffice writes as the palette's nearest, put back into the .xlsx (``docshift/engine/sheet_colours.py``)."""

import io
import struct
import zipfile

import olefile
import openpyxl
from conftest import ROOT
from conftest import _soffice_save as soffice
from openpyxl.styles import Border, Font, PatternFill, Side
from workbooks import record, rewritten, saved_as_xls, with_workbook_stream, xfs_of_cells

from docshift.engine import convert, sheet_colours

DASHBOARD = ROOT.parent / "shared" / "corpus" / "xls" / "46137.xls"  # a table in Excel's TableStyleLight8
THEME = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<a:theme xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" name="Made"><a:themeElements>
<a:clrScheme name="Made"><a:dk1><a:sysClr val="windowText" lastClr="000000"/></a:dk1><a:lt1><a:sysClr val="window"
lastClr="FFFFFF"/></a:lt1><a:dk2><a:srgbClr val="1F497D"/></a:dk2><a:lt2><a:srgbClr val="EEECE1"/></a:lt2>
<a:accent1><a:srgbClr val="2E8B57"/></a:accent1><a:accent2><a:srgbClr val="C0504D"/></a:accent2><a:accent3>
<a:srgbClr val="9BBB59"/></a:accent3><a:accent4><a:srgbClr val="8064A2"/></a:accent4><a:accent5><a:srgbClr
val="4BACC6"/></a:accent5><a:accent6><a:srgbClr val="F79646"/></a:accent6><a:hlink><a:srgbClr val="0000FF"/>
</a:hlink><a:folHlink><a:srgbClr val="800080"/></a:folHlink></a:clrScheme></a:themeElements></a:theme>"""


def colours(result, sheet, cells):
    """(fill RGB, text RGB) of each of ``cells`` (A1 names) of ``sheet`` of the workbook ``result``."""
    book = openpyxl.load_workbook(result)[sheet]
    return [(book[cell].fill.fgColor.rgb, book[cell].font.color.rgb if book[cell].font.color else None)
            for cell in cells]


def test_a_dashboard_s_table_takes_excel_s_colours(office, tmp_path):
    """``46137.xls``'s table: its header is the theme's accent 1 (4F81BD) with white text, its bands accent 1
    lighter by 60% and 80% (Excel shows B8CCE4 and DBE5F1). A plain soffice writes the palette's 333399, 99CCFF and
    CCCCFF; docshift's result the theme's colours, each channel within one step of Excel's."""
    cells = ["C46", "C47", "C48"]
    plain = colours(soffice(DASHBOARD, "xlsx", tmp_path / "plain"), "EntityDistributionDashboard", cells)
    assert [fill for fill, _ in plain] == ["FF333399", "FF99CCFF", "FFCCCCFF"]
    ours = colours(convert.convert(office, DASHBOARD, "xls", tmp_path / "work", 60).path,
                   "EntityDistributionDashboard", cells)
    assert ours[0] == ("FF4F81BD", "FFFFFFFF")
    for (fill, _), excel in zip(ours[1:], ("B8CCE4", "DBE5F1"), strict=True):
        assert all(abs(int(fill[2 + at:4 + at], 16) - int(excel[at:at + 2], 16)) <= 1 for at in (0, 2, 4))


def test_a_workbook_s_own_theme_and_rgb_colours(office, tmp_path):
    """A workbook made here whose THEME record holds its own theme (accent 1 sea green, 2E8B57): a cell filled with
    accent 1 lighter by 40%, one whose text is the RGB 123456 and one whose left border is the RGB 00AA00, each beside
    a cell of another format of the same palette colours and no XFEXT, which keeps LibreOffice's colours."""
    book = openpyxl.Workbook()
    sheet = book.active
    for cell in ("A1", "A2"):
        sheet[cell] = "filled"
        sheet[cell].fill = PatternFill("solid", fgColor="FF99CCFF")
        sheet[cell].font = Font(italic=cell == "A1")  # a format of its own
    for cell in ("B1", "B2"):
        sheet[cell] = "text"
        sheet[cell].font = Font(color="FF333399", bold=cell == "B1")
    for cell in ("C1", "C2"):
        sheet[cell] = "bordered"
        sheet[cell].border = Border(left=Side("thin", color="FF333399"))
        sheet[cell].font = Font(bold=cell == "C1")
    made = saved_as_xls(book, tmp_path, "coloured")
    with olefile.OleFileIO(str(made)) as ole:
        xfs = xfs_of_cells(ole.openstream("Workbook").read())
    package = io.BytesIO()
    with zipfile.ZipFile(package, "w") as themed:
        themed.writestr("theme/theme/theme1.xml", THEME)

    def xfext(xf, kind, colour_type, tint, value):
        property_ = struct.pack("<HHHhI", kind, 20, colour_type, tint, value) + bytes(8)
        return record(0x087D, struct.pack("<HH", 0x087D, 0) + bytes(8) + struct.pack("<HHHH", 0, xf, 0, 1)
                      + property_)

    theme = record(0x0896, struct.pack("<HH", 0x0896, 0) + bytes(8) + struct.pack("<I", 0) + package.getvalue())
    added = (theme + xfext(xfs[0, 0], 4, 3, round(0.4 * 32767), 4) + xfext(xfs[0, 1], 13, 2, 0, 0x563412)
             + xfext(xfs[0, 2], 9, 2, 0, 0x00AA00))
    source = with_workbook_stream(made, lambda stream: rewritten(
        stream, lambda rec_type, body, index: added + record(0x000A, body) if rec_type == 0x000A and index == 0
        else None), tmp_path / "themed.xls")
    assert xfs[0, 0] != xfs[1, 0] and xfs[0, 1] != xfs[1, 1] and xfs[0, 2] != xfs[1, 2]
    wanted = sheet_colours.xf_colours(source)
    assert wanted[xfs[0, 0]].fore == sheet_colours.tinted("2E8B57", round(0.4 * 32767) / 32767)
    assert wanted[xfs[0, 1]].text == "123456"
    result = convert.convert(office, source, "xls", tmp_path / "work", 60).path
    ours = colours(result, "Sheet", ["A1", "A2", "B1", "B2"])
    assert ours[0][0] == "FF" + sheet_colours.tinted("2E8B57", round(0.4 * 32767) / 32767) and ours[1][0] == "FF99CCFF"
    assert ours[2][1] == "FF123456" and ours[3][1] == "FF333399"
    with zipfile.ZipFile(result) as package:  # the theme of the result is the workbook's (``sheet_theme``)
        assert '<a:accent1><a:srgbClr val="2E8B57"/></a:accent1>' in package.read("xl/theme/theme1.xml").decode()
    sides = openpyxl.load_workbook(result)["Sheet"]
    assert sides["C1"].border.left.color.rgb == "FF00AA00" and sides["C2"].border.left.color.rgb == "FF333399"

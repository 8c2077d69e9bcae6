"""Number formats that LibreOffice's import of an .xls sets to General: a cell that takes its format from a built-in
style, and codes its formatter refuses; and built-in formats Excel shows in its reader's locale, which LibreOffice
writes as US codes. The result gets the .xls's formats back, and nothing else changes."""

import re
import struct
import zipfile

import openpyxl
import pytest
from conftest import _soffice_save as soffice
from workbooks import record, rewritten, saved_as_xls, with_workbook_stream, with_xfs_edited, xfs_of_cells

from docshift.engine import convert, sheet_numbers
from docshift.engine.sheet_numbers import BIFF_FORMAT, BIFF_NUMBER, BIFF_RK, BIFF_XF

BIFF_STYLE, CURRENCY = 0x0293, 4  # a STYLE record, and the built-in style Currency's number
ACCOUNTING = 44  # Excel's built-in accounting format with a currency symbol, the Currency style's
# a fraction of nine-digit denominators, and a time of the system's format whose third section shows zero as nothing
FRACTION = "#\\ ??/?????????"
TIME = '[$-F400]h:mm:ss\\ AM/PM;[$-F400]h:mm:ss\\ AM/PM;_-* ""??_-;_-@_-'
KEPT = "0.00%"  # a format LibreOffice keeps


def format_record(number, code):
    return record(BIFF_FORMAT, struct.pack("<HHB", number, len(code), 0) + code.encode("latin-1"))


def losing(stream):
    """The Workbook ``stream`` (LibreOffice's: A1 an accounting amount, A2 a fraction, A3 a time, A4 a General
    number, A5 a percentage) with A1's XF taking its format from the Currency style, which has the built-in
    accounting format, and the fraction's and the time's FORMAT records given codes LibreOffice refuses."""
    found = {"styles": {}, "xfs": []}

    def look(rec_type, body, _):
        if rec_type == BIFF_STYLE and body[1] & 0x80:  # a built-in style: its XF, and which style it is
            found["styles"][body[2]] = struct.unpack_from("<H", body)[0] & 0x0FFF
        elif rec_type in (BIFF_NUMBER, BIFF_RK) and struct.unpack_from("<HH", body) == (0, 0):
            found["a1"] = struct.unpack_from("<H", body, 4)[0]

    rewritten(stream, look)
    currency = found["styles"][CURRENCY]

    def edit(rec_type, body, index):
        if rec_type == BIFF_FORMAT:
            number, _, _ = struct.unpack_from("<HHB", body)
            code = body[5:].decode("latin-1")
            return format_record(number, {"# ??/??": FRACTION, "h:mm:ss\\ AM/PM": TIME}.get(code, code))
        if rec_type == BIFF_XF and index in (currency, found["a1"]):
            xf = bytearray(body)
            struct.pack_into("<H", xf, 2, ACCOUNTING)
            if index == found["a1"]:
                struct.pack_into("<H", xf, 4, currency << 4 | 0x0001)  # locked, a cell XF of the Currency style
                xf[9] &= ~sheet_numbers.NUMBER_USED  # that takes its format from its style
            return record(rec_type, bytes(xf))
        return None

    return rewritten(stream, edit)


@pytest.fixture(scope="module")
def amounts(tmp_path_factory):
    out = tmp_path_factory.mktemp("numbers")
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Amounts"
    for row, (value, code) in enumerate([(1234.5, '_("$"* #,##0.00_);_("$"* \\(#,##0.00\\);_("$"* "-"??_);_(@_)'),
                                         (0.75, "# ??/??"), (0.5, "h:mm:ss AM/PM"), (42, "General"),
                                         (0.125, KEPT)], 1):
        sheet.cell(row, 1, value).number_format = code
    book.save(out / "amounts.xlsx")
    return with_workbook_stream(soffice(out / "amounts.xlsx", "xls", out), losing, out / "losing.xls")


def cell_formats(result):
    """The number format of A1:A5 of the first sheet of the .xlsx ``result``, as openpyxl reads them."""
    sheet = openpyxl.load_workbook(result).worksheets[0]
    return [sheet.cell(row, 1).number_format for row in range(1, 6)]


def test_the_xls_gives_each_formatted_cell_its_format(amounts):
    """A1 takes the Currency style's built-in format; A4 is General and not named."""
    assert sheet_numbers.formats_of(amounts) == {"Amounts": {(0, 0): ACCOUNTING, (1, 0): FRACTION, (2, 0): TIME,
                                                             (4, 0): "0.00%"}}


def test_formats_set_to_general_are_put_back(office, amounts, tmp_path):
    """A plain soffice's .xlsx shows A1:A3 as General; docshift's has the .xls's formats, the rest of the sheet is as
    LibreOffice wrote it, and LibreOffice reads A1 back as a currency."""
    plain = soffice(amounts, "xlsx", tmp_path / "plain")
    assert cell_formats(plain) == ["General", "General", "General", "General", KEPT]
    converted = convert.convert(office, amounts, "xls", tmp_path / "work", 60).path
    assert cell_formats(converted) == [openpyxl.styles.numbers.BUILTIN_FORMATS[ACCOUNTING], FRACTION, TIME,
                                       "General", KEPT]
    with zipfile.ZipFile(plain) as before, zipfile.ZipFile(converted) as after:
        cells = [re.sub(rb' s="[0-9]+"', b"", package.read("xl/worksheets/sheet1.xml")) for package in (before,
                                                                                                          after)]
    assert cells[0] == cells[1]
    read = soffice(converted, "fods", tmp_path / "read").read_text()
    assert 'office:value-type="currency" office:value="1234.5"' in read


def test_a_result_that_kept_every_format_is_untouched(amounts, tmp_path):
    """Where LibreOffice wrote each cell's format (here the .xlsx the .xls was saved from), nothing changes."""
    kept = tmp_path / "kept.xlsx"
    with zipfile.ZipFile(amounts.parent / "amounts.xlsx") as made, zipfile.ZipFile(kept, "w") as out:
        for name in made.namelist():
            out.writestr(name, made.read(name))
    before = kept.read_bytes()
    assert sheet_numbers.mend(kept, amounts, "xls") == 0
    assert kept.read_bytes() == before


STYLES = ('<{p}styleSheet xmlns{colon}{q}="http://schemas.openxmlformats.org/spreadsheetml/2006/main">{formats}'
          '<{p}fonts count="1"><{p}font/></{p}fonts><{p}cellStyleXfs count="1"><{p}xf numFmtId="0"/></{p}cellStyleXfs>'
          '<{p}cellXfs count="2"><{p}xf numFmtId="164" fontId="0"/><{p}xf numFmtId="0" fontId="0">'
          '<{p}alignment horizontal="left"/></{p}xf></{p}cellXfs></{p}styleSheet>')


@pytest.mark.parametrize("prefix", ["", "x"])
@pytest.mark.parametrize("formats", [True, False])
def test_styles_are_added_after_the_workbook_s_own(prefix, formats):
    """A style copied from a cell's, given the format: a code goes in numFmts (made where there is none), a built-in
    format by its number; one style for each (style, format) however many cells take it; counts follow."""
    p, colon = (f"{prefix}:", ":") if prefix else ("", "")
    own = f'<{p}numFmts count="1"><{p}numFmt numFmtId="164" formatCode="General"/></{p}numFmts>' if formats else ""
    data = STYLES.format(p=p, colon=colon, q=prefix, formats=own).encode()
    styles = sheet_numbers.Styles.of(data, "xl/styles.xml")
    assert styles.formats == [164, 0] and (styles.codes == {164: "General"}) is formats
    made = [styles.with_format(1, '"$"#,##0'), styles.with_format(0, 14), styles.with_format(1, '"$"#,##0')]
    assert made == [2, 3, 2]
    written = styles.written(data, "xl/styles.xml").decode()
    number = 165 if formats else 164
    added = f'<{p}numFmt numFmtId="{number}" formatCode="&quot;$&quot;#,##0"/>'
    expected = STYLES.format(p=p, colon=colon, q=prefix, formats=(
        own.replace('count="1"', 'count="2"').replace(f"</{p}numFmts>", f"{added}</{p}numFmts>") if formats
        else f'<{p}numFmts count="1">{added}</{p}numFmts>'))
    expected = expected.replace(f'<{p}cellXfs count="2">', f'<{p}cellXfs count="4">').replace(
        f"</{p}cellXfs>", f'<{p}xf numFmtId="{number}" fontId="0" applyNumberFormat="true"><{p}alignment '
                          f'horizontal="left"/></{p}xf><{p}xf numFmtId="14" fontId="0" applyNumberFormat="true"/>'
                          f"</{p}cellXfs>")
    assert written == expected


def test_only_number_cells_of_a_general_style_that_the_xls_formats_change():
    """A text cell, a cell of a style with a format, and a cell the .xls leaves General keep their styles."""
    data = STYLES.format(p="", colon="", q="", formats="").encode()
    styles = sheet_numbers.Styles.of(data, "xl/styles.xml")
    sheet = (b'<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData><row r="1">'
             b'<c r="A1" s="1" t="n"><v>1</v></c><c r="B1" s="1" t="s"><v>0</v></c><c r="C1" s="0" t="n"><v>2</v></c>'
             b'<c r="D1" s="1" t="n"><v>3</v></c><c r="E1" s="1"><v>4</v></c></row></sheetData></worksheet>')
    wanted = {(0, 0): "0.0", (0, 1): "0.0", (0, 2): "0.0", (0, 4): 10}
    edit = sheet_numbers._restyling(wanted, {1: None}, styles)
    written, given = edit(sheet, "xl/worksheets/sheet1.xml")
    assert given == 2
    assert written == sheet.replace(b'<c r="A1" s="1"', b'<c r="A1" s="2"').replace(b'<c r="E1" s="1"',
                                                                                     b'<c r="E1" s="3"')


# dates, times and an amount Excel shows in its reader's locale (A1:A6), then a short date on a text and a blank cell
BUILT_INS = [14, 15, 17, 20, 22, 37]
BEYOND = {8: 14, 9: 14}


@pytest.fixture(scope="module")
def built_in(tmp_path_factory):
    """An .xls whose A1:A6 have Excel's built-in formats ``BUILT_INS`` (no FORMAT record: their XFs name the
    number), A7 a format of its own whose code is LibreOffice's for the first of them, and A8 (a text) and A9 (blank)
    the built-in short date."""
    out = tmp_path_factory.mktemp("built-in")
    book = openpyxl.Workbook()
    sheet = book.active
    for row in range(1, 10):
        cell = sheet.cell(row, 1, 40293.7378 if row < 8 else "text" if row == 8 else None)
        cell.font = openpyxl.styles.Font(size=8 + row)  # an XF of its own
    sheet.cell(7, 1).number_format = sheet_numbers.US_CODES[14]
    formats = dict(enumerate(BUILT_INS)) | {row - 1: number for row, number in BEYOND.items()}
    xls = saved_as_xls(book, out, "built-in")

    def given(number):
        def edit(xf):
            struct.pack_into("<H", xf, 2, number)
            xf[9] |= sheet_numbers.NUMBER_USED
        return edit

    def formatted(stream):
        xfs = xfs_of_cells(stream)
        return with_xfs_edited(stream, {xfs[row, 0]: given(number) for row, number in formats.items()})

    return with_workbook_stream(xls, formatted, out / "built-in-formats.xls")


def test_built_in_formats_written_as_us_codes_are_built_in_again(office, built_in, tmp_path):
    """A plain soffice writes each built-in format as its US code ([$-409]m/d/yyyy: a date in the US order whatever
    the reader's locale); docshift's cells have the built-in formats again, and the cell whose own format has that
    code keeps it."""
    plain = openpyxl.load_workbook(soffice(built_in, "xlsx", tmp_path / "plain")).worksheets[0]
    assert [plain.cell(row, 1).number_format for row in range(1, 8)] == \
        [sheet_numbers.US_CODES[number] for number in BUILT_INS] + [sheet_numbers.US_CODES[14]]
    assert [plain.cell(row, 1).number_format for row in BEYOND] == [sheet_numbers.US_CODES[14]] * 2
    converted = convert.convert(office, built_in, "xls", tmp_path / "work", 60).path
    sheet = openpyxl.load_workbook(converted).worksheets[0]
    assert [sheet.cell(row, 1)._style.numFmtId for row in range(1, 7)] == BUILT_INS
    assert [(sheet.cell(row, 1).value, sheet.cell(row, 1)._style.numFmtId) for row in BEYOND] == \
        [("text", 14), (None, 14)]
    assert sheet.cell(7, 1).number_format == sheet_numbers.US_CODES[14]
    read = soffice(converted, "fods", tmp_path / "read").read_text()
    assert (read.count('office:value-type="date"'), read.count('office:value-type="time"')) == (5, 1)  # A4 a time

"""TRUE, FALSE and errors typed into an .xls's cells (``docshift/engine/sheet_constants.py``).

The suite's workbook is written by xlwt: typed booleans and each of Excel's seven errors (BOOLERR records), formulas
whose results are a boolean or an error (``=TRUE``, ``=NA()``, ``=1/0``), a number and a text.
"""

import re
import struct
import zipfile

import openpyxl
import pytest
import xlwt
from conftest import _soffice_save as soffice
from workbooks import excel_95, excel_95_file, record

from docshift.engine import convert, sheet_constants
from docshift.engine.inventory.common import ErrorValue

ERRORS = {0x2A: "#N/A", 0x07: "#DIV/0!", 0x17: "#REF!", 0x0F: "#VALUE!", 0x00: "#NULL!", 0x1D: "#NAME?",
          0x24: "#NUM!"}
TYPED = ["TRUE", "FALSE", *ERRORS.values()]
FORMULAS = ["=TRUE()", "=NA()", "=1/0"]
FORMULA = re.compile(rb'<f aca="false">[^<]*</f>')
BOOLEAN, ERROR, ERROR_FORMULA = sheet_constants.BOOLEAN, sheet_constants.ERROR, sheet_constants.ERROR_FORMULA
CELL_TYPE = re.compile(rb'\st="([a-z]+)"')


@pytest.fixture(scope="module")
def workbook(tmp_path_factory):
    """The .xls: row 1 TRUE and FALSE typed, row 2 the seven errors typed, row 3 the three formulas, row 4 a number
    and a text."""
    path = tmp_path_factory.mktemp("constants") / "typed.xls"
    book = xlwt.Workbook()
    sheet = book.add_sheet("Typed")
    sheet.write(0, 0, True)
    sheet.write(0, 1, False)
    for column, code in enumerate(ERRORS):
        sheet.row(1).set_cell_error(column, code)
    for column, formula in enumerate(("TRUE", "NA()", "1/0")):
        sheet.write(2, column, xlwt.Formula(formula))
    sheet.write(3, 0, 42)
    sheet.write(3, 1, "text")
    book.save(str(path))
    return path


def sheet_part(result):
    with zipfile.ZipFile(result) as package:
        return package.read("xl/worksheets/sheet1.xml")


def cells_of(sheet):
    return re.search(rb"<sheetData>.*</sheetData>", sheet, re.DOTALL).group(0)


def read_back(result, outdir):
    """The workbook's first sheet as LibreOffice reads ``result`` (its values calculated again): rows of texts."""
    outdir.mkdir()
    copy = outdir / "back.xlsx"
    copy.write_bytes(result.read_bytes())
    return [line.split(",") for line in soffice(copy, "csv", outdir).read_text().splitlines()]


def test_typed_values_stay_values_and_formulas_stay_formulas(office, workbook, tmp_path):
    """A plain soffice writes each typed value as a formula: TRUE(), FALSE(), NA(), and a formula of no text for
    the six other errors, which LibreOffice reading the result back calculates to Err:520. docshift's result holds
    each typed value alone, and each formula of the .xls as it was; the sheet's cells are the plain one's with the
    typed values' formulas taken out, byte for byte (other mends write the sheet's print settings)."""
    plain = soffice(workbook, "xlsx", tmp_path / "plain")
    plain_sheet = sheet_part(plain)
    made = FORMULA.findall(plain_sheet)
    assert made[:9] == [b'<f aca="false">TRUE()</f>', b'<f aca="false">FALSE()</f>', b'<f aca="false">NA()</f>',
                        *[b'<f aca="false"></f>'] * 6]
    assert read_back(plain, tmp_path / "plain-back")[1][1:] == ["Err:520"] * 6

    result = convert.convert(office, workbook, "xls", tmp_path / "work", 60).path
    ours = sheet_part(result)
    assert FORMULA.findall(ours) == made[9:] == [b'<f aca="false">TRUE()</f>', b'<f aca="false">NA()</f>',
                                                 b'<f aca="false">1/0</f>']
    assert cells_of(ours) == cells_of(FORMULA.sub(b"", plain_sheet, count=9))  # the typed values' come first
    back = read_back(result, tmp_path / "back")
    assert back[0][:2] + back[1][:7] == TYPED
    assert back[2][:3] == ["TRUE", "#N/A", "#DIV/0!"] and back[3][:2] == ["42", "text"]

    cells = openpyxl.load_workbook(result)["Typed"]
    assert [cells.cell(1, column).value for column in (1, 2)] == [True, False]
    assert [cells.cell(2, column).value for column in range(1, 8)] == list(ERRORS.values())
    assert [cells.cell(3, column).value for column in range(1, 4)] == FORMULAS


def test_typed_values_of_an_excel_95_workbook_stay_values(office, tmp_path):
    """Excel 95 holds typed values in the same BOOLERR records, in its Book stream, and LibreOffice makes the same
    formulas of them: they were left in, as only a BIFF8 Workbook stream was read."""
    typed = ((1, 1, 0), (2, 0, 0), (3, 0x07, 1), (4, 0x2A, 1))  # B1 TRUE, C1 FALSE, D1 #DIV/0!, E1 #N/A
    cells = b"".join(record(0x0205, struct.pack("<HHHBB", 0, column, 16, value, error))
                     for column, value, error in typed)
    source = excel_95_file(tmp_path / "typed95.xls", excel_95("typed", cells=cells))
    assert sheet_constants.constants_of(source) == {"Sheet": {b"B1": (BOOLEAN, 1), b"C1": (BOOLEAN, 0),
                                                              b"D1": (ERROR, 0x07), b"E1": (ERROR, 0x2A)}}
    plain = sheet_part(soffice(source, "xlsx", tmp_path / "plain"))
    assert FORMULA.findall(plain) == [b'<f aca="false">TRUE()</f>', b'<f aca="false">FALSE()</f>',
                                      b'<f aca="false"></f>', b'<f aca="false">NA()</f>']
    result = convert.convert(office, source, "xls", tmp_path / "work", 60)
    assert FORMULA.findall(sheet_part(result.path)) == []
    assert cells_of(sheet_part(result.path)) == cells_of(FORMULA.sub(b"", plain))
    row = openpyxl.load_workbook(result.path)["Sheet"][1]
    assert [cell.value for cell in row] == ["typed", True, False, "#DIV/0!", "#N/A"]
    assert result.fidelity["complete"] is True, result.fidelity["lost"]


SHEET = ('<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData><row r="1">'
         '<c r="A1" s="1" t="b"><f aca="false">TRUE()</f><v>1</v></c>'
         '<c r="B1" t="b"><f aca="false">FALSE()</f><v>0</v></c>'
         '<c r="C1" s="2" t="e"><f aca="false">NA()</f><v>#N/A</v></c>'
         '<c r="D1" s="2" t="e"><f aca="false"></f><v>#REF!</v></c>'
         '<c r="E1" s="2" t="n"><f aca="false"></f><v>0</v></c>'
         '<c r="F1" s="2" t="e"><f aca="false"></f><v>#N/A</v></c>'
         '</row></sheetData></worksheet>')


def test_a_formula_goes_only_where_the_xls_typed_its_value():
    """TRUE(), FALSE() and NA() go where the .xls has a BOOLERR of that value, and only there; a formula of no text
    gets its text where the .xls holds a formula of one error constant, and goes from any other cell, which then
    holds the value the .xls stored (where the inventory read one). The .xls's cells are read only where a sheet
    has such a formula."""
    data = SHEET.encode()
    asked = []

    def typed(cells, stored=None):
        def constants():
            asked.append(1)
            return {"Typed": cells}
        return sheet_constants._valuing("Typed", constants, stored or {})

    everything = {b"A1": (BOOLEAN, 1), b"B1": (BOOLEAN, 0), b"C1": (ERROR, 0x2A), b"F1": (ERROR_FORMULA, 0x07)}
    written, count = typed(everything)(data, "xl/worksheets/sheet1.xml")
    assert count == 6 and FORMULA.findall(written) == [b'<f aca="false">#DIV/0!</f>']
    assert written == data.replace(b'<f aca="false">TRUE()</f>', b"").replace(b'<f aca="false">FALSE()</f>', b"") \
        .replace(b'<f aca="false">NA()</f>', b"").replace(b'<f aca="false"></f><v>#REF!', b"<v>#REF!") \
        .replace(b'<f aca="false"></f><v>0', b"<v>0") \
        .replace(b'<f aca="false"></f><v>#N/A', b'<f aca="false">#DIV/0!</f><v>#N/A')  # stored.py writes its value
    # formulas of the .xls (no BOOLERR there: =#N/A is an error formula), or a BOOLERR of another value: kept
    written, count = typed({b"A1": (BOOLEAN, 0), b"C1": (ERROR_FORMULA, 0x2A)})(data, "xl/worksheets/sheet1.xml")
    assert count == 3 and b"TRUE()" in written and b"FALSE()" in written and b"NA()" in written
    assert b'<f aca="false"></f>' not in written
    # the values the .xls stored where LibreOffice wrote others; one it wrote as stored keeps its bytes
    written, _ = typed({}, {b"D1": ErrorValue("#REF!"), b"E1": 7.5, b"F1": "a & b"})(
        data, "xl/worksheets/sheet1.xml")
    assert b'<c r="D1" s="2" t="e"><v>#REF!</v></c>' in written and b'<c r="E1" s="2"><v>7.5</v></c>' in written
    assert b'<c r="F1" s="2" t="inlineStr"><is><t xml:space="preserve">a &amp; b</t></is></c>' in written
    asked.clear()
    plain = data.replace(b'<f aca="false">TRUE()</f>', b"").replace(b'<f aca="false">FALSE()</f>', b"") \
        .replace(b'<f aca="false">NA()</f>', b"").replace(b'<f aca="false"></f>', b"")
    assert typed(everything)(plain, "xl/worksheets/sheet1.xml") == (plain, 0) and not asked


def test_the_typed_cells_of_the_xls_are_read(workbook):
    """The BOOLERR records of each sheet: (whether an error, its value) by cell."""
    found = sheet_constants.constants_of(workbook)
    assert found == {"Typed": {b"A1": (BOOLEAN, 1), b"B1": (BOOLEAN, 0),
                               **{f"{column}2".encode(): (ERROR, code) for column, code in zip("ABCDEFG", ERRORS)}}}


def test_a_workbook_without_typed_values_or_errors_is_left_unread(tmp_path, caplog):
    """Where the inventory's cells hold no boolean and no error, no file is read: a missing one goes unnoticed. Where
    they hold one, the files are read, and a missing one is logged, never raised."""
    missing = tmp_path / "missing.xlsx"
    assert sheet_constants.mend(missing, tmp_path / "missing.xls", "xls", {"Sheet1": {b"A1": 1.0, b"A2": "x"}}) == 0
    assert sheet_constants.mend(missing, tmp_path / "missing.doc", "doc", None) == 0
    assert not caplog.records
    assert sheet_constants.mend(missing, tmp_path / "missing.xls", "xls", {"Sheet1": {b"A1": ErrorValue("#N/A")}}) \
        == 0
    assert [record.getMessage().startswith("the typed values of") for record in caplog.records] == [True]


def with_formulas(path, sheet_name, replaced, typed_true=False):
    """An .xls at ``path`` whose first row's cells are formulas with the stored results and tokens ``replaced``
    gives them ({column: (the result's 8 bytes, the tokens)}): xlwt writes =1/0 in each, and each FORMULA record is
    then written again. ``typed_true``: A2 holds a TRUE typed."""
    import struct

    import olefile

    from docshift.engine import cfb

    book = xlwt.Workbook()
    sheet = book.add_sheet(sheet_name)
    for column in replaced:
        sheet.write(0, column, xlwt.Formula("1/0"))
    if typed_true:
        sheet.write(1, 0, True)
    book.save(str(path))
    with olefile.OleFileIO(str(path)) as ole:
        data = ole.openstream("Workbook").read()
    out, pos = [], 0
    while pos + 4 <= len(data):
        kind, length = struct.unpack_from("<HH", data, pos)
        body = data[pos + 4:pos + 4 + length]
        if kind == 0x0006:  # row, column, format; the stored result; its flags; then the tokens' size and tokens
            result, tokens = replaced[struct.unpack_from("<H", body, 2)[0]]
            body = body[:6] + result + b"\0\0" + body[16:20] + struct.pack("<H", len(tokens)) + tokens
        out.append(struct.pack("<HH", kind, len(body)) + body)
        pos += 4 + length
    path.write_bytes(cfb.write(cfb.Entry("Root Entry", children=[cfb.Entry("Workbook", data=b"".join(out))])))
    return path


@pytest.fixture(scope="module")
def error_formulas(tmp_path_factory):
    """An .xls whose A1 is the formula =#DIV/0! and B1 =#REF! (one PtgErr token each, the .xls's stored result
    that error), C1 =#N/A and D1 =1/0."""
    error = {code: (bytes((2, 0, code, 0, 0, 0, 0xFF, 0xFF)), bytes((0x1C, code))) for code in (0x07, 0x17, 0x2A)}
    one_by_zero = (bytes((2, 0, 0x07, 0, 0, 0, 0xFF, 0xFF)), bytes((0x1E, 1, 0, 0x1E, 0, 0, 0x06)))
    return with_formulas(tmp_path_factory.mktemp("error-formulas") / "errors.xls", "Errors",
                         {0: error[0x07], 1: error[0x17], 2: error[0x2A], 3: one_by_zero})


def test_a_formula_of_one_error_constant_keeps_its_text_and_its_stored_value(office, error_formulas, tmp_path):
    """LibreOffice 25.2 reads =#N/A as NA(), but any other formula of one error constant as a formula of no text
    whose value is #N/A, where the .xls stored #DIV/0! or #REF!: a plain soffice's result holds those. docshift's
    holds each formula with its text and the stored error, as LibreOffice and openpyxl read it back; the report is
    complete."""
    assert sheet_constants.constants_of(error_formulas) == {"Errors": {
        b"A1": (ERROR_FORMULA, 0x07), b"B1": (ERROR_FORMULA, 0x17), b"C1": (ERROR_FORMULA, 0x2A)}}
    plain = FORMULA.findall(sheet_part(soffice(error_formulas, "xlsx", tmp_path / "plain")))
    assert plain == [b'<f aca="false"></f>', b'<f aca="false"></f>', b'<f aca="false">NA()</f>',
                     b'<f aca="false">1/0</f>']

    converted = convert.convert(office, error_formulas, "xls", tmp_path / "work", 60)
    cells = re.findall(rb'<c r="[A-D]1"[^>]*>(.*?)</c>', sheet_part(converted.path))
    assert cells == [b'<f aca="false">#DIV/0!</f><v>#DIV/0!</v>', b'<f aca="false">#REF!</f><v>#REF!</v>',
                     b'<f aca="false">NA()</f><v>#N/A</v>', b'<f aca="false">1/0</f><v>#DIV/0!</v>']
    assert read_back(converted.path, tmp_path / "back")[0][:4] == ["#DIV/0!", "#REF!", "#N/A", "#DIV/0!"]
    row = openpyxl.load_workbook(converted.path)["Errors"][1]
    assert [cell.value for cell in row[:4]] == ["=#DIV/0!", "=#REF!", "=NA()", "=1/0"]
    assert converted.fidelity["complete"], converted.fidelity["lost"]


@pytest.fixture(scope="module")
def unread_formulas(tmp_path_factory):
    """An .xls with formulas LibreOffice does not read: A1 a reference through a sheet index the workbook does not
    have (stored 10), B1 a name it does not have (stored 12), C1 a token that is none (stored TRUE); and A2 a TRUE
    typed."""
    import struct

    return with_formulas(tmp_path_factory.mktemp("unread-formulas") / "unread.xls", "Unread", {
        0: (struct.pack("<d", 10.0), bytes((0x3A,)) + struct.pack("<HHH", 7, 0, 0)),
        1: (struct.pack("<d", 12.0), bytes((0x23,)) + struct.pack("<I", 40)),
        2: (bytes((1, 0, 1, 0, 0, 0, 0xFF, 0xFF)), bytes((0xFF,)))}, typed_true=True)


def test_a_formula_libreoffice_does_not_read_leaves_the_value_the_xls_stored(office, unread_formulas, tmp_path):
    """LibreOffice writes each such formula with no text, and #NAME? or #N/A for two of the three values the .xls
    stored: a plain soffice's result holds those, which LibreOffice reads back as Err:520. docshift's holds each
    value the .xls stored, alone, as LibreOffice and openpyxl read it back; the report is complete."""
    plain = sheet_part(soffice(unread_formulas, "xlsx", tmp_path / "plain"))
    assert re.findall(rb'<c r="[A-C]1"[^>]*>(.*?)</c>', plain) == [
        b'<f aca="false"></f><v>#NAME?</v>', b'<f aca="false"></f><v>12</v>', b'<f aca="false"></f><v>#N/A</v>']

    converted = convert.convert(office, unread_formulas, "xls", tmp_path / "work", 60)
    cells = re.findall(rb'<c r="[A-C]1"([^>]*)>(.*?)</c>', sheet_part(converted.path))
    assert [(CELL_TYPE.findall(attributes), content) for attributes, content in cells] == [
        ([], b"<v>10</v>"), ([b"n"], b"<v>12</v>"), ([b"b"], b"<v>1</v>")]
    assert read_back(converted.path, tmp_path / "back")[0][:3] == ["10", "12", "TRUE"]
    assert [cell.value for cell in openpyxl.load_workbook(converted.path)["Unread"][1][:3]] == [10, 12, True]
    assert converted.fidelity["complete"], converted.fidelity["lost"]

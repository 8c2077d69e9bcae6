"""An HTML table under ``.xls`` that carries Excel's marks of its cells (``webarchive.html_workbook``): what many web
applications export "for Excel", and what Excel itself saves as a web page. Calc's HTML import reads a class's
number format but no cell's own style, and neither ``x:str`` nor ``x:num``: a plain ``soffice`` loses an ID's or a
postcode's leading zeros, and keeps the text a format shows instead of the value. The pages are written here as such
exports write them."""

import importlib.util
import zipfile
from pathlib import Path

from conftest import _soffice_save as soffice
from test_web_archives import cells, webarchive

from docshift.engine import convert

EXPORT = """<html xmlns:o="urn:schemas-microsoft-com:office:office" xmlns:x="urn:schemas-microsoft-com:office:excel"
xmlns="http://www.w3.org/TR/REC-html40"><head><meta http-equiv="Content-Type" content="text/html; charset=utf-8">
<meta name=ProgId content=Excel.Sheet><title>Orders export</title>
<style>.money {{ mso-number-format:"\\#\\,\\#\\#0\\.00"; }}</style></head><body><table>
<tr><th>ID</th><th>Postcode</th><th>Phone</th><th>Amount</th><th>Ratio</th><th>Plain</th><th>Caf\u00e9</th><th>Total</th></tr>
<tr><td style="mso-number-format:'\\@'">00123</td><td style='mso-number-format:"\\@"'>02134</td>
<td x:str>0612345678</td><td class=money x:num="4058.342">4,058.34</td><td x:num x:fmla="=1/2">0.5</td>
<td>1,234.50</td><td>{cafe}</td><td class=money x:num>2,000.50</td></tr>
</table></body></html>"""


def test_an_export_for_excel_keeps_its_cells_as_excel_reads_them(office, tmp_path):
    page = tmp_path / "export.xls"
    page.write_bytes(EXPORT.format(cafe="cr\u00e8me").encode())
    plain = cells(soffice(page, "xlsx", tmp_path / "plain"))
    assert (plain["A2"], plain["B2"], plain["C2"]) == ("123", "2134", "612345678")  # each lost its zeros
    converted = convert.convert(office, page, "xls", tmp_path / "work", 60)
    found = cells(converted.path)
    assert (found["A2"], found["B2"], found["C2"]) == ("00123", "02134", "0612345678")
    assert float(found["D2"]) == 4058.342  # the value, not the text its format shows
    assert (float(found["E2"]), float(found["F2"]), found["G2"]) == (0.5, 1234.5, "cr\u00e8me")
    assert float(found["H2"]) == 2000.5  # an x:num with no value: its text is the number, in its class's format
    assert converted.detected_format == "html"
    with zipfile.ZipFile(converted.path) as package:
        assert package.read("xl/workbook.xml").count(b"<sheet ") == 1
        assert b"#,##0.00" in package.read("xl/styles.xml")
        # the page's title and its <meta> names, which Calc makes document properties, as a plain soffice keeps them
        assert b"<dc:title>Orders export</dc:title>" in package.read("docProps/core.xml")
        assert b'name="ProgId"><vt:lpwstr>Excel.Sheet</vt:lpwstr>' in package.read("docProps/custom.xml")


def test_only_an_html_page_under_xls_with_excels_marks_is_made_ready(tmp_path):
    """A page without Excel's marks goes to LibreOffice as it is, and so does a text, a page under .doc, or a page
    that is no HTML."""
    module = webarchive()
    marked = EXPORT.format(cafe="x").encode()
    cases = {"marked.xls": marked, "marked.doc": marked, "plain.xls": b"<html><body><table><tr><td>007</td></tr>"
             b"</table></body></html>", "text.xls": b"ID\tmso-number-format\n00123\t1\n"}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
    made = module.html_workbook(tmp_path / "marked.xls", tmp_path / "out")
    assert made is not None and not made.mht and made.page == str(tmp_path / "out" / "marked.xls")
    # the cells Excel's marks give a format, and what the page LibreOffice loads says of them
    assert made.formatted == [(0, 1, 0, "@", False), (0, 1, 1, "@", False), (0, 1, 3, "#,##0.00", True),
                              (0, 1, 7, "#,##0.00", True)]
    ready = (tmp_path / "out" / "marked.xls").read_bytes()
    assert ready.count(b'sdnum="1033;0;@"') == 3 and b'sdval="4058.342"' in ready
    for name in ("marked.doc", "plain.xls", "text.xls"):
        assert module.html_workbook(tmp_path / name, tmp_path / name.replace(".", "-")) is None, name
        assert not (tmp_path / name.replace(".", "-")).exists()


def test_a_columns_cells_one_after_another_take_their_format_as_one_range():
    """A page of thousands of rows gives a column's cells their format a range at a time, not a cell at a time."""
    folder = Path(__file__).resolve().parents[2] / "docshift" / "engine" / "uno"
    spec = importlib.util.spec_from_file_location("excelsheet", folder / "excelsheet.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module._runs([0, 1, 2, 4, 5, 9]) == [(0, 2), (4, 5), (9, 9)]
    assert module._runs([]) == [] and module._runs([7]) == [(7, 7)]


def test_a_head_of_many_comments_is_told_at_once(tmp_path):
    """Comments before a page's first tag are read each up to its end: a head of a hundred comments that is no page
    would otherwise be tried every way of cutting them (twenty took 0.16 s, each more doubling it)."""
    module = webarchive()
    (tmp_path / "comments.xls").write_bytes(b"<!--a-->" * 100 + b"x:num mso-number-format")
    assert module.html_workbook(tmp_path / "comments.xls", tmp_path / "out") is None
    (tmp_path / "page.xls").write_bytes(b"<!--a-->" * 100 + EXPORT.format(cafe="x").encode())
    assert module.html_workbook(tmp_path / "page.xls", tmp_path / "out") is not None


def test_a_format_reads_excels_escapes_of_four_digits():
    """Excel writes a quote in a format as \\0022, and the next letter may be a hex digit: "Average" stays a word
    (read as CSS, 0022A made one character of five digits, as Perl's Spreadsheet::WriteExcel pages showed)."""
    page = webarchive().excelpage
    code = r'"\[<=2\]\0022Low\0022* 0\;\[>=4\]\0022High\0022* 0\;\0022Average\0022* 0"'
    assert page._format(code) == '[<=2]"Low"* 0;[>=4]"High"* 0;"Average"* 0'
    assert page._format(r'"\#\,\#\#0\.00"') == "#,##0.00" and page._format(r'"\22 x"') == '"x'

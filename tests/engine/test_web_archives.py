"""Web archives (MHT) that Word or Excel saved under ``.doc`` or ``.xls`` (``docshift/engine/uno/webarchive.py``).

Office opens a "Single File Web Page" under a legacy name, and SPEC accepts Word-saved MHT under ``.doc``; LibreOffice
has no import for it and reads it as plain text (a plain ``soffice --convert-to`` makes a document of its MIME
headers). The suite writes both kinds as Office does, with Python's ``email``: a Word page whose picture is in the
archive, a VML twin of it in a conditional comment; a workbook whose two sheets are pages of their own, named in the
frameset page's ``x:ExcelWorksheets``, one sheet showing a picture."""

import importlib.util
import re
import struct
import sys
import zipfile
import zlib
from email import encoders
from email.mime.base import MIMEBase
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from pathlib import Path

import pytest
from conftest import _soffice_save as soffice

from docshift.engine import convert
from docshift.errors import ConversionFailed

BASE = "file:///C:/0A1B2C3D/"
WORD_PAGE = """<html xmlns:v="urn:schemas-microsoft-com:vml" xmlns:o="urn:schemas-microsoft-com:office:office"
xmlns:w="urn:schemas-microsoft-com:office:word" xmlns="http://www.w3.org/TR/REC-html40">
<head><meta http-equiv=Content-Type content="text/html; charset=windows-1252"><meta name=ProgId content=Word.Document>
<meta name=Generator content="Microsoft Word 11"></head><body lang=EN-US><div class=Section1>
<p class=MsoNormal>Quarterly memo: caf\u00e9 budget approved.</p>
<p class=MsoNormal><!--[if gte vml 1]><v:shape style='width:30pt;height:30pt'><v:imagedata src="memo_files/image001.png"
o:title=""/></v:shape><![endif]--><![if !vml]><img width=40 height=40 src="memo_files/image002.png"
v:shapes="_x0000_i1025"><![endif]></p><p class=MsoNormal>Signed, the board.</p></div></body></html>
"""
FRAMESET = """<html xmlns:o="urn:schemas-microsoft-com:office:office" xmlns:x="urn:schemas-microsoft-com:office:excel"
xmlns="http://www.w3.org/TR/REC-html40"><head><meta name=ProgId content=Excel.Sheet>
<!--[if gte mso 9]><xml><x:ExcelWorkbook><x:ExcelWorksheets>
<x:ExcelWorksheet><x:Name>Budget</x:Name><x:WorksheetSource HRef="book_files/sheet001.htm"/></x:ExcelWorksheet>
<x:ExcelWorksheet><x:Name>Notes &amp; more</x:Name>
<x:WorksheetSource HRef="book_files/sheet002.htm"/></x:ExcelWorksheet>
</x:ExcelWorksheets></x:ExcelWorkbook></xml><![endif]--></head>
<frameset rows="*,39"><frame src="book_files/sheet001.htm" name="frSheet">
<frame src="book_files/tabstrip.htm"></frameset>
</html>
"""
SHEET = """<html xmlns:x="urn:schemas-microsoft-com:office:excel" xmlns="http://www.w3.org/TR/REC-html40"><head>
<meta name=ProgId content=Excel.Sheet><link rel=Stylesheet href=stylesheet.css></head><body>
<table border=0 cellpadding=0 cellspacing=0>{rows}</table></body></html>
"""


def png(red, green, blue):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    pixels = b"".join(b"\0" + bytes((red, green, blue)) * 4 for _ in range(4))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(pixels)) + chunk(b"IEND", b""))


def archive(document_type, parts):
    """A web archive as Office writes one: ``parts`` [(name below BASE, MIME type, bytes)], the page first."""
    message = MIMEMultipart("related")
    message["X-Document-Type"] = document_type
    for name, mime, data in parts:
        if mime.startswith("text/"):
            part = MIMEText(data.decode("cp1252"), mime.split("/")[1], "windows-1252")
        else:
            part = MIMEBase(*mime.split("/"))
            part.set_payload(data)
            encoders.encode_base64(part)
        part["Content-Location"] = BASE + name
        message.attach(part)
    return message.as_bytes()


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    out = tmp_path_factory.mktemp("mht")
    (out / "memo.doc").write_bytes(archive("Document", [
        ("memo.htm", "text/html", WORD_PAGE.encode("cp1252")),
        ("memo_files/image001.png", "image/png", png(255, 0, 0)),
        ("memo_files/image002.png", "image/png", png(255, 0, 0)),
        ("memo_files/filelist.xml", "text/xml", b"<xml/>")]))
    budget = SHEET.format(rows="<tr><td>Item</td><td>Cost</td></tr><tr><td>Paper</td><td align=right>12.5</td></tr>"
                               "<tr><td><img width=20 height=20 src=image001.png></td><td>logo</td></tr>")
    notes = SHEET.format(rows="<tr><td>Approved by the board</td></tr>")
    (out / "book.xls").write_bytes(archive("Workbook", [
        ("book.htm", "text/html", FRAMESET.encode()),
        ("book_files/sheet001.htm", "text/html", budget.encode()),
        ("book_files/sheet002.htm", "text/html", notes.encode()),
        ("book_files/image001.png", "image/png", png(0, 0, 255)),
        ("book_files/stylesheet.css", "text/css", b"td {font-family: Arial}"),
        ("book_files/tabstrip.htm", "text/html", b"<html><body>tabs</body></html>")]))
    return out


def webarchive():
    """The sandbox's module itself, loaded from its file, with the sandbox module it imports: they use Python's
    standard library alone."""
    folder = Path(__file__).resolve().parents[2] / "docshift" / "engine" / "uno"
    modules = {}
    for name in ("excelpage", "webarchive"):
        spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
        modules[name] = importlib.util.module_from_spec(spec)
        with pytest.MonkeyPatch.context() as patch:
            patch.setitem(sys.modules, "excelpage", modules["excelpage"])
            spec.loader.exec_module(modules[name])
    return modules["webarchive"]


def test_libreoffice_reads_a_web_archive_as_text(pages, tmp_path):
    """What the unpacking is for: a plain soffice makes a document of the archive's MIME headers."""
    plain = soffice(pages / "memo.doc", "docx:MS Word 2007 XML", tmp_path)
    with zipfile.ZipFile(plain) as package:
        text = package.read("word/document.xml").decode()
    assert "MIME-Version" in text and "&lt;html" in text  # the page's markup shown as text


def test_a_word_archive_converts_with_its_text_and_picture(office, pages, tmp_path):
    converted = convert.convert(office, pages / "memo.doc", "doc", tmp_path / "work", 60)
    assert converted.detected_format == "mht"
    with zipfile.ZipFile(converted.path) as package:
        text = package.read("word/document.xml").decode()
        media = [name for name in package.namelist() if name.startswith("word/media/")]
        links = package.read("word/_rels/document.xml.rels").decode()
    assert "Quarterly memo: caf\u00e9 budget approved." in text and "Signed, the board." in text
    assert "MIME-Version" not in text
    assert len(media) == 1  # the <img> LibreOffice shows; its VML twin is in a comment
    assert 'TargetMode="External"' not in links  # the picture is in the package, not a link to the scratch space
    assert converted.fidelity["counts"]["images"] == {"source": 1, "result": 1}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]


def test_a_workbook_archive_keeps_its_sheets_names_and_cells(office, pages, tmp_path):
    converted = convert.convert(office, pages / "book.xls", "xls", tmp_path / "work", 60)
    assert converted.detected_format == "mht"
    with zipfile.ZipFile(converted.path) as package:
        workbook = package.read("xl/workbook.xml").decode()
        strings = package.read("xl/sharedStrings.xml").decode()
    assert re.findall(r'<sheet name="([^"]+)"', workbook) == ["Budget", "Notes &amp; more"]
    for text in ("Paper", "Approved by the board", "logo"):
        assert text in strings
    # Calc's HTML import drops a sheet's pictures: docshift puts the picture on its sheet, in the cell it stood in
    assert converted.fidelity["counts"]["sheets"] == {"source": 2, "result": 2}
    assert converted.fidelity["counts"]["images"] == {"source": 1, "result": 1}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]
    assert [(column, row) for column, _, row, _ in anchors(converted.path)] == [(0, 2)]  # A3: the <img>'s cell


def anchors(path, drawing="xl/drawings/drawing1.xml"):
    """(column, its offset, row, its offset) of each picture's top left corner in a workbook's drawing, offsets in
    EMU."""
    with zipfile.ZipFile(path) as package:
        xml = package.read(drawing).decode()
    return [tuple(int(value) for value in found) for found in re.findall(
        r"<xdr:from><xdr:col>(\d+)</xdr:col><xdr:colOff>(-?\d+)</xdr:colOff><xdr:row>(\d+)</xdr:row>"
        r"<xdr:rowOff>(-?\d+)</xdr:rowOff></xdr:from>", xml)]


# a sheet's page as Excel writes one: its picture drawn in VML for Excel and, for other browsers, as an <img> in an
# absolutely placed span, laid out by a table of its own; two empty rows written as one row (mso-xlrowspan)
DRAWN = """<tr height=20><td height=20>Title</td><td>Q1</td><td>Q2</td></tr>
<tr height=20><td height=20></td><td align=left valign=top><!--[if gte vml 1]><v:shape id="Picture_x0020_1"
 style='position:absolute;margin-left:7.5pt;margin-top:3pt;width:45pt;height:22.5pt'><v:imagedata
 src="image002.png"/></v:shape><![endif]--><![if !vml]><span style='mso-ignore:vglayout;position:absolute;z-index:1;
 margin-left:10px;margin-top:4px;width:60px;height:30px'><table cellpadding=0 cellspacing=0><tr><td width=0 height=0>
 </td><td width=20></td><td width=40></td></tr><tr><td height=6></td></tr><tr><td height=24></td><td></td>
 <td align=left valign=top><img width=40 height=24 src=image002.png v:shapes="Picture_x0020_1"></td></tr></table>
 </span><![endif]><span style='mso-ignore:vglayout2'><table cellpadding=0 cellspacing=0><tr><td height=20 width=64>
 </td></tr></table></span></td><td>7</td></tr>
<tr height=40 style='height:30.0pt;mso-xlrowspan:2'><td height=40 colspan=3 style='mso-ignore:colspan'></td></tr>
<tr height=20><td height=20>Total</td><td align=right>12.5</td><td align=right>7</td></tr>"""
ONE_SHEET = FRAMESET.replace("""<x:ExcelWorksheet><x:Name>Notes &amp; more</x:Name>
<x:WorksheetSource HRef="book_files/sheet002.htm"/></x:ExcelWorksheet>
""", "")


def cells(path):
    """The first sheet's cells of a workbook: reference -> its value, a shared string's text for a string."""
    with zipfile.ZipFile(path) as package:
        strings = re.findall(r"<t[^>]*>([^<]*)</t>", package.read("xl/sharedStrings.xml").decode())
        sheet = package.read("xl/worksheets/sheet1.xml").decode()
    found = {}
    for reference, attributes, value in re.findall(r'<c r="([A-Z]+[0-9]+)"([^>]*)>(?:<f>[^<]*</f>)?<v>([^<]*)</v>',
                                                   sheet):
        found[reference] = strings[int(value)] if 't="s"' in attributes else value
    return found


def test_a_workbook_archive_keeps_its_cells_where_excel_had_them_and_its_drawings(office, tmp_path):
    """Calc's HTML import makes the table that lays out a drawing cells of the sheet, and one row of an
    ``mso-xlrowspan`` row: every cell below and right of them would move. docshift imports the page without them
    and puts the picture on the sheet, in its cell, offset as the span and its table place it."""
    (tmp_path / "drawn.xls").write_bytes(archive("Workbook", [
        ("book.htm", "text/html", ONE_SHEET.encode()),
        ("book_files/sheet001.htm", "text/html", SHEET.format(rows=DRAWN).encode()),
        ("book_files/image002.png", "image/png", png(0, 128, 0))]))
    converted = convert.convert(office, tmp_path / "drawn.xls", "xls", tmp_path / "work", 60)
    assert converted.fidelity["counts"]["images"] == {"source": 1, "result": 1}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]
    found = cells(converted.path)
    assert {key: found.get(key) for key in ("A1", "C2", "A5", "B5", "C5")} == \
        {"A1": "Title", "C2": "7", "A5": "Total", "B5": "12.5", "C5": "7"}
    # in B2, 10 + 20 pixels right and 4 + 6 down (a pixel is 9525 EMU; LibreOffice keeps hundredths of a mm, 360 EMU)
    [(column, left, row, top)] = anchors(converted.path)
    assert (column, row) == (1, 1)
    assert abs(left - 30 * 9525) <= 360 and abs(top - 10 * 9525) <= 360


def test_a_mime_text_that_is_no_web_archive_stays_text(office, tmp_path):
    (tmp_path / "mail.doc").write_bytes(b"MIME-Version: 1.0\r\nContent-Type: text/plain\r\n\r\nJust a message.\r\n")
    with pytest.raises(ConversionFailed) as failed:
        convert.convert(office, tmp_path / "mail.doc", "doc", tmp_path / "work", 60)
    assert (failed.value.code, failed.value.detected_format) == ("unsupported_content", "text")


def test_no_part_is_written_outside_the_archive_folder(tmp_path):
    module = webarchive()
    data = archive("Document", [
        ("memo.htm", "text/html", b"<html><body><p>Hi <img src=memo_files/a.png></p></body></html>"),
        ("memo_files/a.png", "image/png", png(1, 2, 3)),
        ("../../escape.png", "image/png", png(4, 5, 6)),
        ("memo_files/../../escape2.png", "image/png", png(4, 5, 6))])
    data = data.replace(b"file:///C:/0A1B2C3D/../../escape.png", b"file:///D:/elsewhere/escape.png")
    (tmp_path / "memo.doc").write_bytes(data)
    unpacked = module.unpack(tmp_path / "memo.doc", tmp_path / "out" / "web-archive")
    written = sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*") if path.is_file())
    assert written == ["memo.doc", "out/web-archive/memo.doc", "out/web-archive/memo_files/a.png"]
    assert unpacked.page == str(tmp_path / "out" / "web-archive" / "memo.doc")
    assert unpacked.pictures == 1 and unpacked.sheets == [] and unpacked.names == []
    (tmp_path / "plain.doc").write_bytes(b"Just some plain text.\n")
    assert module.unpack(tmp_path / "plain.doc", tmp_path / "none") is None
    assert not (tmp_path / "none").exists()


def test_a_picture_named_by_its_content_id_is_found(tmp_path):
    """A page saved from a mail names its pictures ``cid:``, with no Content-Location: each is counted and inlined."""
    module = webarchive()
    message = MIMEMultipart("related")
    message.attach(MIMEText('<html><body><p>Logo: <img src="cid:logo.1@example"></p></body></html>', "html"))
    picture = MIMEBase("image", "png")
    picture.set_payload(png(9, 9, 9))
    encoders.encode_base64(picture)
    picture["Content-ID"] = "<logo.1@example>"
    message.attach(picture)
    (tmp_path / "mail.doc").write_bytes(message.as_bytes())
    unpacked = module.unpack(tmp_path / "mail.doc", tmp_path / "out")
    assert unpacked.pictures == 1
    page = Path(unpacked.page).read_bytes()
    assert b'src="data:image/png;base64,' in page and b"cid:" not in page


def test_a_page_of_a_charset_python_does_not_know_converts(office, tmp_path):
    """An unknown charset (and a ``start`` parameter in RFC 2231's form) is no crash: the page is read as Latin-1."""
    message = MIMEMultipart("related")
    page = MIMEText("<html><body><p>A page of an odd charset.</p></body></html>", "html", "us-ascii")
    page.set_param("charset", "x-unknown-8")
    page["Content-Location"] = BASE + "odd.htm"
    message.attach(page)
    message.set_param("start", ("us-ascii", "en", "<none@example>"))
    (tmp_path / "odd.doc").write_bytes(message.as_bytes())
    converted = convert.convert(office, tmp_path / "odd.doc", "doc", tmp_path / "work", 60)
    assert converted.detected_format == "mht"
    with zipfile.ZipFile(converted.path) as package:
        assert "A page of an odd charset." in package.read("word/document.xml").decode()


def test_a_row_that_stands_for_more_rows_than_a_sheet_has_is_made_no_more(tmp_path):
    """``mso-xlrowspan`` rows are made as many rows for Calc, but no more rows are added to a page than an Excel 97-2003
    sheet holds, whatever it claims: here the first row's 65,536, then its own one row each."""
    module = webarchive()
    rows = "<tr style='mso-xlrowspan:1000000000'><td></td></tr>" * 3 + \
        "<tr><td>Last</td><td style='mso-number-format:\"0\\.0\"'>1.5</td></tr>"
    (tmp_path / "huge.xls").write_bytes(archive("Workbook", [
        ("book.htm", "text/html", ONE_SHEET.encode()),
        ("book_files/sheet001.htm", "text/html", SHEET.format(rows=rows).encode())]))
    unpacked = module.unpack(tmp_path / "huge.xls", tmp_path / "out")
    page = Path(unpacked.page).read_text()
    assert page.count("<tr") == module.excelpage.MAX_ROWS + 3 and "Last" in page
    # and where the cells stand is counted as they were written out: "1.5" is in the page's last row
    assert unpacked.formatted == [(0, module.excelpage.MAX_ROWS + 2, 1, "0.0", False)]


# cells as Excel writes them: the value shown rounded, its whole value in x:num and its format in its class; a text
# that would read as a number marked x:str; a class's format in the linked style sheet, with Excel's CSS escapes
VALUED = """<tr><td class=xl25 x:num="0.33333333333333331">33.3%</td><td class=xl26 x:num="1234.5678">1,234.57</td>
<td x:str>00123</td><td class=xl27>00456</td><td style='mso-number-format:"0\\.000"' x:num="2.71828">2.718</td>
<td class=xl28>10%</td><td class=xl29>03/07/2005</td><td class=xl28>n/a</td><td class=xl30>4:17:12 AM</td></tr>"""
VALUED_CSS = rb""".xl25 {mso-style-parent:style0; mso-number-format:0\.0%;}
.xl26
	{mso-number-format:"\#\,\#\#0\.00";}
td.xl27 {mso-number-format:"\@";}
.xl28 {mso-number-format:0%;}
.xl29 {mso-number-format:"dd\/mm\/yyyy";}
.xl30 {mso-number-format:"\[$-F400\]h\:mm\:ss\\ AM\/PM";}"""


def test_a_workbook_archive_keeps_each_cells_stored_value_and_format(office, tmp_path):
    """The page shows a cell's value as formatted; Excel keeps the value itself in x:num (unless the text, read by
    the format, gives it back) and the format in the cell's class. Calc's import, reading the text, would keep
    33.3%, 1,234.57 and 10% as text, 03/07/2005 as 7 March, and 00123 as 123."""
    (tmp_path / "valued.xls").write_bytes(archive("Workbook", [
        ("book.htm", "text/html", ONE_SHEET.encode()),
        ("book_files/sheet001.htm", "text/html", SHEET.format(rows=VALUED).encode()),
        ("book_files/stylesheet.css", "text/css", VALUED_CSS)]))
    converted = convert.convert(office, tmp_path / "valued.xls", "xls", tmp_path / "work", 60)
    found = cells(converted.path)
    # LibreOffice writes 15 significant digits
    assert float(found["A1"]) == pytest.approx(1 / 3, abs=1e-14) and float(found["B1"]) == 1234.5678
    assert (found["C1"], found["D1"], float(found["E1"])) == ("00123", "00456", 2.71828)
    assert (float(found["F1"]), float(found["G1"]), found["H1"]) == (0.1, 38536, "n/a")  # 3 July 2005, day first
    assert float(found["I1"]) == pytest.approx((4 * 3600 + 17 * 60 + 12) / 86400)  # "the system's time", as shown
    with zipfile.ZipFile(converted.path) as package:
        styles = package.read("xl/styles.xml").decode()
    # each in English, as Excel reads a page's formats: LibreOffice names the language where it is not the document's
    codes = {re.sub(r"^\[\$-409\]", "", code) for code in re.findall(r'formatCode="([^"]*)"', styles)}
    assert {"0.0%", "#,##0.00", "0.000", "@", "0%", "dd/mm/yyyy", "h:mm:ss\\ AM/PM"} <= codes, codes


# a cell's comment as Excel writes it: a mark in the cell and, after the table, the comment in a list, its cell in
# the VML note (row and column counted from 0), its text in the shape's div; both marks for browsers without notes
NOTED = """<tr><td>Plain</td><td>Noted<![if !supportAnnotations]><span class=msocomspan1><span class=msocomspan2
 id="_anchor_1"><a class=msocomanch href="#_msocom_1" name="_msoanchor_1">[1]</a></span></span><![endif]></td></tr>
<tr><td>Below</td><td>7</td></tr>"""
COMMENTS = """<div style='mso-element:comment-list'><![if !supportAnnotations]><hr class=msocomhide><![endif]>
<div style='mso-element:comment'><![if !supportAnnotations]><div id="_com_1" class=msocomtxt><![endif]>
<div><![if !supportAnnotations]><a class=msocomhide href="#_msoanchor_1" name="_msocom_1">[1]</a><![endif]><!--[if gte
mso 9]><xml><v:shape id="_x0000_s1025" type="#_x0000_t202"><x:ClientData ObjectType="Note"><x:Row>0</x:Row>
<x:Column>1</x:Column><x:Author>Ann</x:Author></x:ClientData></v:shape></xml><![endif]--><![if !vml]><span
style='mso-ignore:vglayout'><![endif]><div v:shape="_x0000_s1025" style='padding:.75pt' class=shape><font
class="font5">Ann:</font><font class="font6"><br>Check this &amp; that.</font></div><![if !vml]></span><![endif]></div>
<![if !supportAnnotations]></div><![endif]></div></div>
"""


def test_a_workbook_archives_comments_are_comments_of_their_cells(office, tmp_path):
    """Calc's import makes a comment's mark ("[1]") part of its cell's text, and the list of comments cells below
    the table; docshift makes each a comment of its cell."""
    page = SHEET.format(rows=NOTED).replace("</table></body>", "</table>" + COMMENTS + "</body>")
    (tmp_path / "noted.xls").write_bytes(archive("Workbook", [
        ("book.htm", "text/html", ONE_SHEET.encode()),
        ("book_files/sheet001.htm", "text/html", page.encode())]))
    converted = convert.convert(office, tmp_path / "noted.xls", "xls", tmp_path / "work", 60)
    assert cells(converted.path) == {"A1": "Plain", "B1": "Noted", "A2": "Below", "B2": "7"}
    with zipfile.ZipFile(converted.path) as package:
        [comments] = [name for name in package.namelist() if re.fullmatch(r"xl/comments\d*\.xml", name)]
        xml = package.read(comments).decode()
    assert re.findall(r'<comment ref="([A-Z]+\d+)"', xml) == ["B1"]
    assert "Ann:" in xml and "Check this &amp; that." in xml


def test_a_damaged_page_is_no_crash():
    """What a damaged or hostile page may hold, read as well as it can be: an escape of a surrogate reads as U+FFFD,
    as CSS reads it (Excel's escapes have four hex digits at most: \\FFFFFF0 is U+FFFF, then "FF0"); a size of two
    decimal points is no size. Each raised in the child unpacking the page, which the worker called a crash."""
    excelpage = webarchive().excelpage
    formats = excelpage.number_formats('.xl1 {mso-number-format:"\\FFFFFF0\\D800 0\\0022";}')
    assert formats == {"xl1": '\uffffFF0\ufffd0"'}
    page = ("<table><tr style='mso-xlrowspan:2;height:1.2.3pt'><td></td></tr><tr><td><span style='position:absolute;"
            "margin-left:1.2.3px'><img src=a.png></span></td></tr></table>")
    assert excelpage.for_calc(page.encode(), {}).count(b"<tr") == 3
    assert [found[:3] for found in excelpage.read(page, {})[0]] == [(2, 0, 0.0)]


def test_a_picture_placed_past_any_sheet_is_left_out_and_reported(office, tmp_path):
    """A damaged page may place a picture trillions of pixels away: LibreOffice's positions are 32-bit, so the
    workbook converts without it, its cells kept, and the report names the picture missing."""
    far = DRAWN.replace("margin-left:10px", "margin-left:99999999999999px")
    (tmp_path / "far.xls").write_bytes(archive("Workbook", [
        ("book.htm", "text/html", ONE_SHEET.encode()),
        ("book_files/sheet001.htm", "text/html", SHEET.format(rows=far).encode()),
        ("book_files/image002.png", "image/png", png(0, 128, 0))]))
    converted = convert.convert(office, tmp_path / "far.xls", "xls", tmp_path / "work", 60)
    assert cells(converted.path)["A5"] == "Total"
    assert converted.fidelity["counts"]["images"] == {"source": 1, "result": 0}
    assert converted.fidelity["complete"] is False

"""A workbook's DDE links (``docshift/engine/sheet_dde.py``): written as Excel's external links, and each formula
that reads one as a reference to its item, where LibreOffice writes its own DDE function, which Excel has not; and
the report's ``dde_links``, counted from the .xls's SUPBOOK and EXTERNNAME records.

Made here: a flat OpenDocument sheet whose cells call DDE, saved by LibreOffice as an .xls, which holds each link as
Excel does (a SUPBOOK of service and topic, an EXTERNNAME per item, ``StdDocumentName`` among them).
"""

import re
import struct
import zipfile

import openpyxl
import pytest
from conftest import _soffice_save as soffice
from workbooks import excel_95, excel_95_file

from docshift.engine import convert, sheet_dde
from docshift.engine.inventory import of_source, xls_views
from docshift.engine.inventory.common import DdeItem, DdeLink, Inventory

ESCAPED = '"MTX";"DATA";"dgate.SON"'.replace('"', "&quot;")
SPELLED = '"DDE(""MTX"";""DATA"";""dgate.SON"")"'.replace('"', "&quot;")
CELLS = [  # (the cell's formula, its cached value): two links, a quote in an item, a string that spells a call
    (f"of:=DDE({ESCAPED})", "12.5"), (f"of:=DDE({ESCAPED})*2", "25"),
    ("of:=DDE(&quot;IDT&quot;;&quot;IMKB&quot;;&quot;it&apos;s R1C1&quot;)", "7"), (f"of:={SPELLED}", None)]


@pytest.fixture(scope="module")
def dde_xls(tmp_path_factory):
    out = tmp_path_factory.mktemp("dde")
    cells = "".join(f'<table:table-cell table:formula="{formula}" '
                    + (f'office:value-type="float" office:value="{value}"/>' if value else
                       'office:value-type="string" office:string-value="x"/>') for formula, value in CELLS)
    (out / "feed.fods").write_text(
        '<?xml version="1.0" encoding="UTF-8"?><office:document '
        'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
        'xmlns:of="urn:oasis:names:tc:opendocument:xmlns:of:1.2" office:version="1.3" '
        'office:mimetype="application/vnd.oasis.opendocument.spreadsheet"><office:body>'
        f'<office:spreadsheet><table:table table:name="Prices"><table:table-row>{cells}</table:table-row>'
        "</table:table></office:spreadsheet></office:body></office:document>")
    return soffice(out / "feed.fods", "xls:MS Excel 97", out)


def parts(path):
    with zipfile.ZipFile(path) as package:
        return {name: package.read(name).decode() for name in package.namelist() if name.endswith((".xml", ".rels"))}


def formulas(path):
    return re.findall(r"<f[^>]*>([^<]*)</f>", parts(path)["xl/worksheets/sheet1.xml"])


def test_the_links_are_read_from_the_xls(dde_xls):
    holds = of_source(dde_xls, "xls")
    document = DdeItem("StdDocumentName", True, False, True)
    assert holds.dde == [DdeLink("MTX", "DATA", [document, DdeItem("dgate.SON", True, False, False)]),
                         DdeLink("IDT", "IMKB", [document, DdeItem("it's R1C1", True, False, False)])]
    assert holds.counts["dde_links"] == 2 and holds.where["dde_links"] == ["MTX|DATA!dgate.SON", "IDT|IMKB!it's R1C1"]


def test_a_dde_link_is_an_external_link_that_formulas_reference(office, dde_xls, tmp_path):
    """A plain soffice writes DDE(...) into the formulas and no link; docshift a ddeLink part for each link, listed
    in the workbook, and each call as [n]!'item' (a quote doubled), a string that spells a call left as it is."""
    plain = soffice(dde_xls, "xlsx", tmp_path / "plain")
    assert all("DDE(" in formula for formula in formulas(plain)) and "externalReferences" not in parts(plain)[
        "xl/workbook.xml"]
    converted = convert.convert(office, dde_xls, "xls", tmp_path / "work", 60)
    written = parts(converted.path)
    assert formulas(converted.path)[:3] == ["[1]!'dgate.SON'", "[1]!'dgate.SON'*2", "[2]!'it''s R1C1'"]
    assert formulas(converted.path)[3] == formulas(plain)[3]
    references = re.findall(r'<externalReference\b[^>]*r:id="([^"]*)"', written["xl/workbook.xml"])
    targets = dict(re.findall(r'Id="([^"]*)"[^>]*Target="([^"]*)"', written["xl/_rels/workbook.xml.rels"]))
    links = [written["xl/" + targets[rid]] for rid in references]
    assert [re.search(r"<ddeLink [^>]*>", link).group() for link in links] == [
        '<ddeLink ddeService="MTX" ddeTopic="DATA">', '<ddeLink ddeService="IDT" ddeTopic="IMKB">']
    assert re.findall(r"<ddeItem [^>]*>", links[1]) == ['<ddeItem name="StdDocumentName" ole="1" advise="1"/>',
                                                         '<ddeItem name="it\'s R1C1" advise="1"/>']
    assert written["[Content_Types].xml"].count(sheet_dde.CONTENT_TYPE) == 2
    assert converted.fidelity["counts"]["dde_links"] == {"source": 2, "result": 2}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]
    book = openpyxl.load_workbook(converted.path, keep_links=False)  # openpyxl's links expect a file's path
    assert book["Prices"]["A1"].value == "=[1]!'dgate.SON'"


def test_a_link_lost_is_reported(office, dde_xls, tmp_path, monkeypatch):
    """Without the mend, the result holds LibreOffice's function and no link, and the report names both items."""
    monkeypatch.setattr(sheet_dde, "_mend", lambda result, links: 0)
    converted = convert.convert(office, dde_xls, "xls", tmp_path / "work", 60)
    assert converted.fidelity["complete"] is False
    assert converted.fidelity["counts"]["dde_links"] == {"source": 2, "result": 0}
    assert {"what": "dde_links", "count": 2, "detail": "2 of 2 DDE links are missing; missing: MTX|DATA!dgate.SON, "
            "IDT|IMKB!it's R1C1"} in converted.fidelity["lost"]


def workbook(tmp_path, main, sheet):
    """A package of the ``main`` workbook part and one sheet, as LibreOffice writes them."""
    path = tmp_path / "book.xlsx"
    with zipfile.ZipFile(path, "w") as package:
        package.writestr("[Content_Types].xml", '<Types xmlns="http://schemas.openxmlformats.org/package/2006/'
                         'content-types"></Types>')
        package.writestr("xl/workbook.xml", main)
        package.writestr("xl/_rels/workbook.xml.rels", (
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
            'worksheet" Target="worksheets/sheet1.xml"/></Relationships>'))
        package.writestr("xl/worksheets/sheet1.xml", '<worksheet xmlns="http://schemas.openxmlformats.org/'
                         f'spreadsheetml/2006/main"><sheetData><row r="1">{sheet}</row></sheetData></worksheet>')
    return path


MAIN = ('<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.'
        'openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="S" sheetId="1" r:id="rId1"/>'
        '</sheets>{}<definedNames><definedName name="Feed">DDE(&quot;mt4&quot;,&quot;bid&quot;,&quot;EURUSD'
        '&quot;)</definedName></definedNames></workbook>')
LINKS = [DdeLink("MT4", "BID", [DdeItem("EURUSD", True, False, False), DdeItem("USD\x01", True, False, False)]),
         DdeLink("cmd", "/c calc", [DdeItem("A0", False, False, False)]),
         DdeLink("MTX", "DATA", [DdeItem("A&B", False, True, False)])]  # USD\x01: a name XML cannot hold


def test_references_follow_the_links_there_are_and_calls_that_are_no_item_stay(tmp_path):
    """A workbook that links another workbook already: the DDE links come after it, [2] and [3]; a call is matched
    case aside and names the item as the .xls spells it; a call of no item of the .xls, or with another mode, stays;
    the rest of a formula stays as its part wrote it; a link that starts a program is not written, nor an item whose
    name XML cannot hold."""
    existing = '<externalReferences><externalReference r:id="rId9"/></externalReferences>'
    cells = ('<c r="A1"><f>DDE(&quot;mt4&quot;,&quot;bid&quot;,&quot;eurusd&quot;,0)+1&amp;&quot;a&#13;b&quot;</f>'
             '<v>2</v></c>'
             '<c r="B1"><f>DDE(&quot;MT4&quot;,&quot;BID&quot;,&quot;GBPUSD&quot;)</f><v>1</v></c>'
             '<c r="C1"><f>DDE(&quot;MT4&quot;,&quot;BID&quot;,&quot;EURUSD&quot;,2)</f><v>1</v></c>'
             '<c r="D1"><f>DDE(&quot;cmd&quot;,&quot;/c calc&quot;,&quot;A0&quot;)</f><v>1</v></c>'
             '<c r="E1"><f>DDE(&quot;MTX&quot;,&quot;DATA&quot;,&quot;A&amp;B&quot;)&lt;3</f><v>1</v></c>')
    path = workbook(tmp_path, MAIN.format(existing), cells)
    assert sheet_dde.mend(path, "xls", LINKS) == 2 + 3  # two links, three calls
    written = parts(path)
    assert formulas(path) == ["[2]!'EURUSD'+1&amp;\"a&#13;b\"",
                              "DDE(&quot;MT4&quot;,&quot;BID&quot;,&quot;GBPUSD&quot;)",
                              "DDE(&quot;MT4&quot;,&quot;BID&quot;,&quot;EURUSD&quot;,2)",
                              "DDE(&quot;cmd&quot;,&quot;/c calc&quot;,&quot;A0&quot;)", "[3]!'A&amp;B'&lt;3"]
    assert "<definedName name=\"Feed\">[2]!'EURUSD'</definedName>" in written["xl/workbook.xml"]
    assert re.findall(r'<externalReference [^>]*r:id="([^"]*)"', written["xl/workbook.xml"]) == ["rId9", "rId2", "rId3"]
    assert re.findall(r"<ddeItem [^>]*>", written["xl/externalLinks/externalLink1.xml"]) == [
        '<ddeItem name="EURUSD" advise="1"/>']
    assert '<ddeLink ddeService="MTX" ddeTopic="DATA"><ddeItems><ddeItem name="A&amp;B" preferPic="1"/>' in written[
        "xl/externalLinks/externalLink2.xml"]
    assert "xl/externalLinks/externalLink3.xml" not in written  # cmd's
    assert written["[Content_Types].xml"].count(sheet_dde.CONTENT_TYPE) == 2


def test_a_link_that_starts_a_program_is_not_kept():
    assert sheet_dde.kept(DdeLink("MTX", "DATA", [])) and sheet_dde.kept(DdeLink("Excel", "[book.xls]Sheet1", []))
    for service, topic in (("cmd", "/c calc"), ("CMD.EXE", "x"), ("C:\\Windows\\System32\\cmd.exe", "x"),
                           ("powershell", "-c x"), ("MSEXCEL", "\\..\\..\\Windows\\System32\\cmd.exe /c calc"),
                           ("Excel", "run.bat"), ("MTX", "DA\x01TA")):
        assert not sheet_dde.kept(DdeLink(service, topic, [])), (service, topic)


def test_a_workbook_without_links_is_untouched(tmp_path):
    path = workbook(tmp_path, MAIN.format("").replace("DDE(", "SUM("), '<c r="A1"><f>SUM(1)</f><v>1</v></c>')
    before = path.read_bytes()
    assert sheet_dde.mend(path, "xls", []) == 0 and sheet_dde.mend(path, "doc", LINKS) == 0
    assert sheet_dde.mend(path, "xls", [LINKS[1]]) == 0 and path.read_bytes() == before  # cmd's alone


def test_an_ole_link_and_an_excel_95_workbook_count_no_dde_link(tmp_path):
    """A SUPBOOK whose EXTERNNAME is an OLE item (fOleLink) links an object, not a server; an Excel 95 workbook
    keeps its DDE links elsewhere, so its count is unknown, not 0."""
    settings = xls_views.Settings()
    settings.workbook_record(xls_views.BIFF_SUPBOOK, struct.pack("<HHB", 0, 9, 0) + b"Word\x03a.doc")
    settings.workbook_record(xls_views.BIFF_EXTERNNAME, struct.pack("<HIBB", xls_views.OLE_LINK, 0, 1, 0) + b"'")
    settings.workbook_record(xls_views.BIFF_SUPBOOK, struct.pack("<HHB", 0, 8, 0) + b"MTX\x03DATA")
    settings.workbook_record(xls_views.BIFF_EXTERNNAME, struct.pack("<HIBB", xls_views.WANT_ADVISE, 0, 3, 0) + b"SON")
    holds = Inventory("xls", {})
    settings.into(holds)
    assert holds.dde == [DdeLink("MTX", "DATA", [DdeItem("SON", True, False, False)])]
    assert holds.counts["dde_links"] == 1
    book = excel_95_file(tmp_path / "95.xls", excel_95("Price"))
    assert of_source(book, "xls").counts["dde_links"] is None

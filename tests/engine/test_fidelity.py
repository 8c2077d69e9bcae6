"""No silent loss: embedded objects, charts, macros and stored formula results reach the result, and the
fidelity report says what did not, counted from the legacy file itself.

Made here: a .doc with an embedded sheet, an .xls with a chart, a .ppt with an embedded workbook.
Read from ``../shared/corpus``: files with VBA projects of each type and VBA user-defined functions.
"""

import io
import struct
import time
import zipfile
from pathlib import Path

import olefile
import openpyxl
import pptx
import pytest
import requests
from conftest import ROOT, flat_odf
from conftest import _soffice_save as soffice
from workbooks import record, rewritten, with_workbook_stream

from docshift.engine import cfb, convert, inventory, vba
from docshift.engine.forkit import Forkit
from docshift.engine.job import Job
from docshift.engine.profile import PROFILE_SETTINGS
from docshift.formats import FORMATS, MEDIA_TYPES

CORPUS = ROOT.parent / "shared" / "corpus"
MACRO_FILES = {"doc": CORPUS / "doc" / "SimpleMacro.doc", "xls": CORPUS / "xls" / "SimpleMacro.xls",
               "ppt": CORPUS / "ppt" / "SimpleMacro.ppt"}
# each calls a VBA user-defined function, whose result LibreOffice cannot recompute
OF = "urn:oasis:names:tc:opendocument:xmlns:of:1.2"
UDF_FILES = [CORPUS / "xls" / "27852.xls", CORPUS / "xls" / "30070.xls"]
SHEET_IN_DOC = flat_odf(
    "text",
    '<text:p>A sheet follows.</text:p><text:p><draw:frame draw:name="Sheet" text:anchor-type="as-char" '
    'svg:width="6cm" svg:height="2cm"><draw:object><office:document office:version="1.2" '
    'office:mimetype="application/vnd.oasis.opendocument.spreadsheet"><office:body><office:spreadsheet>'
    '<table:table table:name="Inner"><table:table-row><table:table-cell office:value-type="float" '
    'office:value="42"><text:p>42</text:p></table:table-cell></table:table-row></table:table>'
    '</office:spreadsheet></office:body></office:document></draw:object></draw:frame></text:p>'
    '<text:p>After the sheet.</text:p>')


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    """``{kind: path}``: a .doc with an embedded sheet, an .xls with a chart, a .ppt with an embedded workbook."""
    from openpyxl.chart import BarChart, Reference

    out = tmp_path_factory.mktemp("embedded")
    (out / "sheet_in_doc.fodt").write_text(SHEET_IN_DOC)
    book = openpyxl.Workbook()
    sheet = book.active
    for row in range(1, 6):
        sheet.append([f"r{row}", row * 3])
    chart = BarChart()
    chart.add_data(Reference(sheet, min_col=2, min_row=1, max_row=5))
    sheet.add_chart(chart, "D2")
    book.save(out / "chart_in_xls.xlsx")
    workbook = io.BytesIO()
    openpyxl.Workbook().save(workbook)
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    slide.shapes.add_ole_object(io.BytesIO(workbook.getvalue()), pptx.enum.shapes.PROG_ID.XLSX, 914400, 914400)
    deck.save(out / "object_in_ppt.pptx")
    return {
        "doc": soffice(out / "sheet_in_doc.fodt", "doc:MS Word 97", out, "OpenDocument Text Flat XML"),
        "xls": soffice(out / "chart_in_xls.xlsx", "xls:MS Excel 97", out),
        "ppt": soffice(out / "object_in_ppt.pptx", "ppt:MS PowerPoint 97", out),
    }


PARTS = {"doc": ("embedded_objects", "word/embeddings/"), "xls": ("charts", "xl/charts/chart"),
         "ppt": ("embedded_objects", "ppt/embeddings/")}


@pytest.mark.parametrize("kind", ["doc", "xls", "ppt"])
def test_embedded_objects_and_charts_are_kept(embedded, office, kind, tmp_path):
    what, prefix = PARTS[kind]
    assert inventory.of_source(embedded[kind], kind).counts[what] == 1  # the made file holds one
    converted = convert.convert(office, embedded[kind], kind, tmp_path, 60)
    with zipfile.ZipFile(converted.path) as package:
        assert any(name.startswith(prefix) for name in package.namelist()), package.namelist()
    assert converted.fidelity["counts"][what] == {"source": 1, "result": 1}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]


def test_a_deck_with_a_sound_converts_without_waiting_for_a_player(office, tmp_path):
    """LibreOffice draws a media object's snapshot while it loads a presentation, and its GStreamer player waits
    10 s for a preroll that never comes where GStreamer's base plugins (playbin) are missing: twice for
    ``sound.ppt``, 20 s of a worker for a file that converts in a tenth of a second. ``make`` installs them, so
    the deck fits a timeout of half that wait, and its result is LibreOffice's own (a plain ``soffice`` without
    the plugins writes the same parts)."""
    converted = convert.convert(office, CORPUS / "ppt" / "sound.ppt", "ppt", tmp_path, 5)
    assert converted.fidelity["complete"] and converted.fidelity["counts"]["images"] == {"source": 1, "result": 1}
    assert len(pptx.Presentation(converted.path).slides) == 1


@pytest.mark.parametrize("kind", ["doc", "xls", "ppt"])
def test_a_profile_that_drops_embedded_content_cannot_pass_unseen(embedded, kind, tmp_path):
    """The profile setting that dropped every embedded object and chart last round: LibreOffice's own export holds
    none (which shows that a parent's profile reaches the children it forks), and the report, counted from the
    legacy file, names the loss. A .doc's object that LibreOffice made a picture is put back from the legacy file
    (``word_objects.py``): its result holds the object, and says so."""
    disabling = PROFILE_SETTINGS.replace(
        "</oor:items>", '<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop '
                        'oor:name="DisableActiveContent" oor:op="fuse"><value>true</value></prop></item>\n</oor:items>')
    office = Forkit(tmp_path / "office", name="disabled", profile_settings=disabling)
    exported = tmp_path / "exported" / f"result.{kind}x"
    exported.parent.mkdir()
    try:
        office.export(embedded[kind], exported, FORMATS[kind].export_filter, 60)
        converted = convert.convert(office, embedded[kind], kind, tmp_path, 60)
    finally:
        office.close()
    what, prefix = PARTS[kind]
    with zipfile.ZipFile(exported) as package:
        assert not [name for name in package.namelist() if name.startswith(prefix)]
    if kind == "doc":
        with zipfile.ZipFile(converted.path) as package:
            assert [name for name in package.namelist() if name.startswith(prefix)]
        assert converted.fidelity["counts"][what] == {"source": 1, "result": 1}
        assert converted.fidelity["complete"] is True, converted.fidelity["lost"]
        return
    assert converted.fidelity["complete"] is False
    assert converted.fidelity["counts"][what] == {"source": 1, "result": 0}
    assert [loss["what"] for loss in converted.fidelity["lost"]] == [what]


@pytest.mark.parametrize("kind", ["doc", "xls", "ppt"])
def test_the_output_check_counts_what_libreoffice_loaded(embedded, office, kind, tmp_path):
    """The bridge counts the embedded objects and charts of the loaded document; an export that drops them is
    named as a loss even where the legacy file's own count cannot be read."""
    what, prefix = PARTS[kind]
    result = tmp_path / "loaded" / f"result.{kind}x"
    result.parent.mkdir()
    report = office.export(embedded[kind], result, FORMATS[kind].export_filter, 60)
    assert report["loaded"]["parts"][what] == 1
    # the same package without the part: what an export that drops it would write
    dropped = tmp_path / f"dropped.{kind}x"
    with zipfile.ZipFile(result) as package, zipfile.ZipFile(dropped, "w") as out:
        for entry in package.infolist():
            if not entry.filename.startswith(prefix):
                out.writestr(entry, package.read(entry))
    unknown = inventory.of_source(embedded[kind], kind)
    unknown.counts[what] = None  # as for a legacy file whose records cannot be read
    kept = inventory.report(unknown, inventory.of_result(result, kind), loaded=report["loaded"]["parts"])
    assert not [loss for loss in kept["lost"] if loss["what"] == what]
    fidelity = inventory.report(unknown, inventory.of_result(dropped, kind), loaded=report["loaded"]["parts"])
    assert fidelity["complete"] is False
    assert [(loss["what"], loss["count"]) for loss in fidelity["lost"]] == [(what, 1)]
    assert "LibreOffice loaded 1" in fidelity["lost"][0]["detail"]


@pytest.mark.parametrize("kind", ["doc", "xls", "ppt"])
def test_what_libreoffice_loaded_is_counted_only_when_asked(embedded, office, kind, tmp_path):
    """Counting what a document loaded walks its sheets' or slides' shapes (two calls over the bridge each): the
    worker asks for it only where the legacy file's records cannot be counted; the sheets, slides and text are
    read either way."""
    what, _ = PARTS[kind]
    results = {}
    for walk in (True, False):
        result = tmp_path / str(walk) / f"result.{kind}x"
        result.parent.mkdir()
        results[walk] = office.export(embedded[kind], result, FORMATS[kind].export_filter, 60, parts=walk)["loaded"]
    assert results[True]["parts"][what] == 1
    assert "parts" not in results[False]
    assert results[False] == {key: value for key, value in results[True].items() if key != "parts"}
    assert set(results[False]) & {"sheets", "slides", "text"}


@pytest.mark.parametrize("kind", ["doc", "xls", "ppt"])
def test_the_worker_asks_for_the_loaded_parts_only_where_the_source_cannot_tell(embedded, office, kind, tmp_path,
                                                                                monkeypatch):
    """The legacy file's own count decides: counted there, LibreOffice is not asked; unreadable there (as in a
    PowerPoint 95 file), LibreOffice counts what it loaded, for the report to compare the result with."""
    what, _ = PARTS[kind]
    sent = recording_requests(monkeypatch)
    counted = convert.convert(office, embedded[kind], kind, tmp_path / "counted", 60)
    of_source = inventory.of_source

    def unreadable(*args):
        found = of_source(*args)
        found.counts[what] = None
        return found

    monkeypatch.setattr(inventory, "of_source", unreadable)
    walked = convert.convert(office, embedded[kind], kind, tmp_path / "walked", 60)
    # each request leaves the walk open; once the file is loaded, the worker says what the source decided
    assert [request["parts"] for request in sent if "filter" in request] == ["ask", "ask"]
    assert [request["parts"] for request in sent if "filter" not in request] == [False, True]
    assert counted.fidelity["counts"][what] == {"source": 1, "result": 1}
    assert walked.fidelity["counts"][what] == {"source": None, "result": 1}
    assert walked.fidelity["complete"] is True, walked.fidelity["lost"]


def test_the_source_is_read_while_libreoffice_loads_it(embedded, office, tmp_path, monkeypatch):
    """The worker reads the legacy file's records on a thread of its own once LibreOffice has the file, so that
    neither waits for the other; the walk waits for that reading."""
    events = recording_requests(monkeypatch)
    of_source = inventory.of_source

    def slow(*args):
        time.sleep(0.5)  # long enough that LibreOffice has the request before the reading ends
        found = of_source(*args)
        events.append("read")
        return found

    monkeypatch.setattr(inventory, "of_source", slow)
    converted = convert.convert(office, embedded["ppt"], "ppt", tmp_path, 60)
    assert ["sent" if isinstance(event, dict) else event for event in events] == ["sent", "read", "sent"]
    # decided by what was read: the source counts its embedded objects, and no text of it is shadowed
    assert events[-1] == {"parts": False, "shadows": False}
    assert converted.fidelity["counts"]["embedded_objects"] == {"source": 1, "result": 1}


def recording_requests(monkeypatch):
    """The list that each request for a child, and each message then sent to it, is appended to, from now on."""
    sent = []
    job, send = Forkit.job, Job.send

    def recording_job(self, request, *args, **kwargs):
        sent.append(request)
        return job(self, request, *args, **kwargs)

    def recording_send(self, message):
        sent.append(message)
        return send(self, message)

    monkeypatch.setattr(Forkit, "job", recording_job)
    monkeypatch.setattr(Job, "send", recording_send)
    return sent


@pytest.mark.parametrize("kind,extension", [("doc", "docm"), ("xls", "xlsm"), ("ppt", "pptm")])
def test_macros_are_kept_in_the_macro_enabled_type(office, kind, extension, tmp_path):
    source = MACRO_FILES[kind]
    modules = vba.modules(source)
    assert modules, f"{source.name} carries VBA"
    converted = convert.convert(office, source, kind, tmp_path, 60)
    assert converted.extension == extension and converted.path.suffix == f".{extension}"
    kept = vba.modules(converted.path)
    assert set(kept) == set(modules)
    for name, code in modules.items():  # Excel's hidden Attribute lines may go, never the code
        assert inventory.normal_code(kept[name]) == inventory.normal_code(code), name
    assert converted.fidelity["counts"]["macros"] == {"source": len(modules), "result": len(modules)}
    assert not [loss for loss in converted.fidelity["lost"] if loss["what"] == "macros"]


@pytest.mark.parametrize("kind,extension", [("doc", "docm"), ("xls", "xlsm"), ("ppt", "pptm")])
def test_a_macro_enabled_package_under_a_legacy_name_keeps_its_project(office, kind, extension, tmp_path):
    """SPEC accepts OOXML under a legacy name. A .docm, .xlsm or .pptm so named became a .docx, .xlsx or .pptx
    without its macros, and its report said complete. Its vbaProject.bin now goes into the macro-enabled result as
    Office wrote it, and the report counts its modules."""
    made = convert.convert(office, MACRO_FILES[kind], kind, tmp_path / "made", 60)  # the source's own project
    renamed = tmp_path / f"renamed.{kind}"
    renamed.write_bytes(made.path.read_bytes())
    with zipfile.ZipFile(renamed) as package:
        project = package.read(next(name for name in package.namelist() if name.endswith("/vbaProject.bin")))
    modules = vba.modules(renamed)
    assert modules
    converted = convert.convert(office, renamed, kind, tmp_path / "again", 60)
    assert converted.detected_format == "ooxml" and converted.extension == extension
    with zipfile.ZipFile(converted.path) as package:
        assert package.read(f"{FORMATS[kind].main_part.split('/')[0]}/vbaProject.bin") == project
    assert converted.fidelity["counts"]["macros"] == {"source": len(modules), "result": len(modules)}
    assert converted.fidelity["complete"], converted.fidelity["lost"]
    removed = convert.convert(office, renamed, kind, tmp_path / "removed", 60, macros="remove")
    assert removed.extension == extension[:-1] + "x" and vba.modules(removed.path) == {}
    assert [loss["what"] for loss in removed.fidelity["lost"]] == ["macros"]


@pytest.mark.parametrize("kind,extension", [("doc", "docx"), ("xls", "xlsx"), ("ppt", "pptx")])
def test_macros_removed_on_request(office, kind, extension, tmp_path):
    source = MACRO_FILES[kind]
    converted = convert.convert(office, source, kind, tmp_path, 60, macros="remove")
    assert converted.extension == extension
    assert vba.modules(converted.path) == {}
    removed = [loss for loss in converted.fidelity["lost"] if loss["what"] == "macros"]
    assert len(removed) == 1 and "removed on request" in removed[0]["detail"]
    assert removed[0]["count"] == len(vba.modules(source))


def test_a_file_without_macros_stays_plain(office, legacy, tmp_path):
    converted = convert.convert(office, legacy["xls"], "xls", tmp_path, 60)
    assert converted.extension == "xlsx"
    assert converted.fidelity["complete"] is True
    assert converted.fidelity["counts"]["macros"] == {"source": 0, "result": 0}


@pytest.mark.parametrize("source", UDF_FILES, ids=[p.name for p in UDF_FILES])
def test_formula_results_are_the_stored_ones(office, source, tmp_path):
    """Calls of VBA user-defined functions keep what Excel stored; a plain LibreOffice gives #VALUE!."""
    plain = soffice(source, "xlsx:Calc MS Excel 2007 XML", tmp_path)
    before = inventory.report(inventory.of_source(source, "xls"), inventory.of_result(plain, "xls"))
    assert before["counts"]["cells"]["result"] < before["counts"]["cells"]["source"]  # the control
    converted = convert.convert(office, source, "xls", tmp_path, 60)
    cells = converted.fidelity["counts"]["cells"]
    assert cells["result"] == cells["source"], converted.fidelity["lost"]
    # an independent reader of cached values sees the source's
    theirs = openpyxl.load_workbook(converted.path, data_only=True, keep_vba=True)
    source_cells = inventory.of_source(source, "xls").cells
    for sheet, values in source_cells.items():
        for ref, value in values.items():
            read = theirs[sheet][ref.decode()].value
            if isinstance(value, float) and not isinstance(value, inventory.StoredDate):
                assert read == pytest.approx(value, rel=1e-9), (sheet, ref)
            elif isinstance(value, str) and not isinstance(value, inventory.ErrorValue):
                assert read == value, (sheet, ref)
    theirs.vba_archive.close()  # openpyxl leaves its in-memory zip open: closed at collection, it warns


def calculated_on_load(path):
    """An .xls as writers that do not calculate leave one. Sheet "Calc": A1 2, B1 3, C1 =A1*B1 stored 0 and marked
    to be calculated always and on load (Spreadsheet::WriteExcel marks every formula so), D1 =A1+B1 with a stale
    result of 99 that Excel stored, unmarked, E1 =A1*10 stored 0 and marked to be calculated on load (Apache POI's
    mark), F1 =A1+1 stored 4 and marked so (JExcelAPI's placeholder; xlwt writes no RECALCID record, as a program
    without a calculation engine writes none). Sheet "Forced": A1 4, B1 =A1*10 stored 0, and an UNCALCED record
    (POI's forced recalculation)."""
    import xlwt

    book = xlwt.Workbook()
    calc, forced = book.add_sheet("Calc"), book.add_sheet("Forced")
    calc.write(0, 0, 2)
    calc.write(0, 1, 3)
    calc.write(0, 2, xlwt.Formula("A1*B1"))
    calc.write(0, 3, xlwt.Formula("A1+B1"))
    calc.write(0, 4, xlwt.Formula("A1*10"))
    calc.write(0, 5, xlwt.Formula("A1+1"))
    forced.write(0, 0, 4)
    forced.write(0, 1, xlwt.Formula("A1*10"))
    book.save(str(path))
    with olefile.OleFileIO(str(path)) as ole:
        data = ole.openstream("Workbook").read()
    out, pos, sheets = [], 0, 0  # sheets: the BOF records so far, the globals' the first
    while pos + 4 <= len(data):
        kind, length = struct.unpack_from("<HH", data, pos)
        body = data[pos + 4:pos + 4 + length]
        if kind == 0x0006:  # a FORMULA: its stored result, then its flags
            stored, flags = {(2, 2): (0.0, 3), (2, 3): (99.0, 0), (2, 4): (0.0, 2), (2, 5): (4.0, 2)}.get(
                (sheets, body[2]), (0.0, 0))
            body = body[:6] + struct.pack("<dH", stored, flags) + body[16:]
        out.append(struct.pack("<HH", kind, len(body)) + body)
        if kind == 0x0809:
            sheets += 1
            if sheets == 3:  # the last sheet's BOF: UNCALCED right after it moves no sheet's offset
                out.append(struct.pack("<HHH", 0x005E, 2, 0))
        pos += 4 + length
    path.write_bytes(cfb.write(cfb.Entry("Root Entry", children=[cfb.Entry("Workbook", data=b"".join(out))])))
    return path


def test_formulas_excel_calculates_on_load_keep_libreoffices_results(office, tmp_path):
    """A stored result is what Excel shows unless no program calculated it and Excel does as it opens the file:
    a placeholder stored for a FORMULA marked to be calculated always or on load by a writer without a calculation
    engine, every formula of a sheet with an UNCALCED record. There LibreOffice's results stay, as in a plain
    soffice's result (6, 20, 3 and 40, where the .xls stored 0 or 4), and the report does not compare them; a
    stale result the .xls stored for an unmarked formula is still what the result holds (99, where LibreOffice
    gives 5)."""
    source = calculated_on_load(tmp_path / "recalculated.xls")
    plain = openpyxl.load_workbook(soffice(source, "xlsx", tmp_path / "plain"), data_only=True)
    assert [plain["Calc"][ref].value for ref in ("C1", "D1", "E1", "F1")] == [6, 5, 20, 3]
    assert plain["Forced"]["B1"].value == 40
    converted = convert.convert(office, source, "xls", tmp_path / "work", 60)
    theirs = openpyxl.load_workbook(converted.path, data_only=True)
    assert [theirs["Calc"][ref].value for ref in ("C1", "D1", "E1", "F1")] == [6, 99, 20, 3]
    assert theirs["Forced"]["B1"].value == 40
    assert converted.fidelity["complete"], converted.fidelity["lost"]
    assert converted.fidelity["counts"]["cells"] == {"source": 4, "result": 4}  # A1, B1, D1 of Calc; A1 of Forced
    formulas = openpyxl.load_workbook(converted.path)
    assert [formulas["Calc"]["C1"].value, formulas["Forced"]["B1"].value] == ["=A1*B1", "=A1*10"]


def test_an_array_formula_keeps_the_results_stored_in_each_of_its_cells(office, tmp_path):
    """An array formula's result fills a range; only its first cell has an ``<f>`` in the .xlsx, the others only
    a ``<v>``. Those keep what Excel stored too (POI's ``Trend.xls``: 19 cells of a TREND were #VALUE!)."""
    cells = "".join(
        '<table:table-row><table:table-cell office:value-type="float" office:value="1"/>'
        + ('<table:table-cell table:number-matrix-columns-spanned="1" table:number-matrix-rows-spanned="3" '
           'table:formula="of:=ROW([.A1:.A3])" office:value-type="float" office:value="1"/>' if row == 1 else
           f'<table:table-cell office:value-type="float" office:value="{row}"/>') + '</table:table-row>'
        for row in (1, 2, 3))
    (tmp_path / "array.fods").write_text(flat_odf("spreadsheet", f'<table:table table:name="S">{cells}</table:table>')
                                         .replace("<office:document ", f"<office:document xmlns:of=\"{OF}\" ", 1))
    made = soffice(tmp_path / "array.fods", "xls:MS Excel 97", tmp_path, "OpenDocument Spreadsheet Flat XML")
    with olefile.OleFileIO(str(made)) as ole:
        book = bytearray(ole.openstream("Workbook").read())
    pos, patched = 0, 0
    while pos + 4 <= len(book):  # each FORMULA record of column B stores (row + 1) * 10 as its result
        kind, size = struct.unpack_from("<HH", book, pos)
        if kind == 0x0006 and struct.unpack_from("<H", book, pos + 6)[0] == 1:
            row = struct.unpack_from("<H", book, pos + 4)[0]
            struct.pack_into("<d", book, pos + 10, (row + 1) * 10.0)
            patched += 1
        pos += 4 + size
    assert patched == 3
    source = tmp_path / "stored.xls"
    source.write_bytes(cfb.write(cfb.Entry("Root Entry", children=[cfb.Entry("Workbook", data=bytes(book))])))

    converted = convert.convert(office, source, "xls", tmp_path / "work", 60)
    assert converted.fidelity["counts"]["cells"] == {"source": 6, "result": 6}, converted.fidelity["lost"]
    theirs = openpyxl.load_workbook(converted.path, data_only=True)
    assert [theirs["S"][f"B{row}"].value for row in (1, 2, 3)] == [10, 20, 30]
    assert openpyxl.load_workbook(converted.path)["S"]["B1"].value.text == "=ROW(A1:A3)"  # the formula stays


def test_a_number_that_is_none_becomes_an_error_every_reader_opens(office, tmp_path):
    """A legacy file written by another program than Excel may hold a NaN (POI's 49761.xls). LibreOffice writes it
    as <v>NaN</v>, which no OOXML number is: openpyxl refuses the whole workbook. It becomes #NUM!, the error
    Excel shows for it, and the report counts the source's NaN as that error: nothing is lost."""
    (tmp_path / "nan.fods").write_text(flat_odf("spreadsheet", (
        '<table:table table:name="S"><table:table-row><table:table-cell office:value-type="float" '
        'office:value="3.14159265358979"/><table:table-cell office:value-type="string"><text:p>kept</text:p>'
        '</table:table-cell></table:table-row></table:table>')))
    made = soffice(tmp_path / "nan.fods", "xls:MS Excel 97", tmp_path, "OpenDocument Spreadsheet Flat XML")
    with olefile.OleFileIO(str(made)) as ole:
        book = bytearray(ole.openstream("Workbook").read())
    at = book.index(struct.pack("<d", 3.14159265358979))
    assert struct.unpack_from("<H", book, at - 10)[0] == 0x0203  # the NUMBER record of A1
    struct.pack_into("<d", book, at, float("nan"))
    source = tmp_path / "nan.xls"
    source.write_bytes(cfb.write(cfb.Entry("Root Entry", children=[cfb.Entry("Workbook", data=bytes(book))])))
    plain = soffice(source, "xlsx:Calc MS Excel 2007 XML", tmp_path / "plain")
    with open(plain, "rb") as opened, pytest.raises(ValueError):  # the control: LibreOffice's own .xlsx
        openpyxl.load_workbook(opened)  # which, failing, leaves the file it opened itself open

    converted = convert.convert(office, source, "xls", tmp_path / "work", 60)
    sheet = openpyxl.load_workbook(converted.path)["S"]
    assert sheet["A1"].value == "#NUM!" and sheet["A1"].data_type == "e"
    assert sheet["B1"].value == "kept"
    assert converted.fidelity["counts"]["cells"] == {"source": 2, "result": 2}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]


def test_stored_results_survive_a_reload_in_libreoffice(office, tmp_path):
    """The rewritten package still opens: LibreOffice converts it again."""
    converted = convert.convert(office, UDF_FILES[1], "xls", tmp_path / "first", 60)
    again = soffice(converted.path, "ods", tmp_path)
    assert again.stat().st_size > 0


# the API ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def key(live):
    return live.register("fidelity-tests")


def submit(live, key, path, **params):
    with open(path, "rb") as f:
        return requests.post(f"{live.base_url}/v1/conversions", params=params,
                             headers={"Authorization": f"Bearer {key}"}, files={"file": (path.name, f)}, timeout=30)


@pytest.mark.parametrize("macros,extension", [(None, "docm"), ("keep", "docm"), ("remove", "docx")])
def test_the_result_is_named_and_served_as_its_type(live, key, macros, extension):
    source = MACRO_FILES["doc"]
    response = submit(live, key, source, **({"macros": macros} if macros else {}))
    assert response.status_code == 202, response.text
    task = live.wait(key, response.json()["task_id"])
    assert task["status"] == "SUCCEEDED", task
    assert task["result_filename"] == f"{source.stem}.{extension}"
    download = requests.get(task["download_url"], timeout=10)
    assert download.headers["Content-Type"] == MEDIA_TYPES[extension]
    assert download.headers["Content-Disposition"] == f'attachment; filename="{task["result_filename"]}"'
    fidelity = task["fidelity"]
    assert fidelity["complete"] is True, fidelity
    macros_lost = [loss for loss in fidelity["lost"] if loss["what"] == "macros"]
    assert bool(macros_lost) == (macros == "remove")


def test_an_unknown_macros_value_is_refused(live, key):
    response = submit(live, key, MACRO_FILES["xls"], macros="run")
    assert response.status_code == 400
    assert response.headers["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "invalid_request" and "macros" in response.json()["detail"]


def test_macros_are_part_of_what_an_idempotency_key_replays(live, key):
    path = MACRO_FILES["xls"]
    first = submit_with_key(live, key, path, "fidelity-key-1", "keep")
    assert first.status_code == 202
    assert submit_with_key(live, key, path, "fidelity-key-1", "keep").json()["task_id"] == first.json()["task_id"]
    conflict = submit_with_key(live, key, path, "fidelity-key-1", "remove")
    assert conflict.status_code == 422 and conflict.json()["code"] == "idempotency_conflict"
    live.wait(key, first.json()["task_id"])


def submit_with_key(live, key, path, idempotency_key, macros):
    with open(path, "rb") as f:
        return requests.post(f"{live.base_url}/v1/conversions", params={"macros": macros},
                             headers={"Authorization": f"Bearer {key}", "Idempotency-Key": idempotency_key},
                             files={"file": (Path(path).name, f)}, timeout=30)


def test_result_macros_that_cannot_be_read_are_a_named_loss(office, tmp_path):
    """The result's VBA project unreadable (its count unknown): the report names the loss, it does not break."""
    source = MACRO_FILES["doc"]
    converted = convert.convert(office, source, "doc", tmp_path, 60)
    held = inventory.of_result(converted.path, "doc")
    held.macros = held.counts["macros"] = None
    fidelity = inventory.report(inventory.of_source(source, "doc"), held)
    assert fidelity["complete"] is False
    assert [(loss["what"], loss["detail"]) for loss in fidelity["lost"]] == \
        [("macros", "the VBA modules could not be read in the result")]


def test_results_a_program_calculated_without_a_recalcid_are_kept(office, tmp_path):
    """OpenOffice.org's Calc marked every formula it wrote to an .xls to be calculated on load and wrote no RECALCID,
    as writers that calculate nothing do, but stored the results it calculated (a FlightGear workbook's 3,370 results
    of functions its macros defined, which LibreOffice calculates as #NAME?). Marked formulas that store several
    numbers other than 0 were calculated: each result goes back, 0 too, where LibreOffice calculates another."""
    import xlwt

    book = xlwt.Workbook()
    sheet = book.add_sheet("Calc")
    sheet.write(0, 0, 2)
    for column in range(1, 5):
        sheet.write(0, column, xlwt.Formula(f"A1*{column}"))
    made = tmp_path / "made.xls"
    book.save(str(made))
    stored_results = {1: 7.5, 2: 8.5, 3: 9.5, 4: 0.0}  # by column; LibreOffice calculates 2, 4, 6 and 8

    def marked(rec_type, body, _):  # a FORMULA: its stored result, marked to be calculated on load
        return record(rec_type, body[:6] + struct.pack("<dH", stored_results[body[2]], 2) + body[16:]) \
            if rec_type == 0x0006 else None

    source = with_workbook_stream(made, lambda stream: rewritten(stream, marked), tmp_path / "calculated.xls")
    plain = openpyxl.load_workbook(soffice(source, "xlsx", tmp_path / "plain"), data_only=True)
    assert [plain["Calc"].cell(1, column).value for column in range(2, 6)] == [2, 4, 6, 8]
    converted = convert.convert(office, source, "xls", tmp_path / "work", 60)
    theirs = openpyxl.load_workbook(converted.path, data_only=True)
    assert [theirs["Calc"].cell(1, column).value for column in range(2, 6)] == [7.5, 8.5, 9.5, 0]
    assert converted.fidelity["complete"], converted.fidelity["lost"]

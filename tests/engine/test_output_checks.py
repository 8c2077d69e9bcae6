"""The worker's checks of a result: the zip directory alone (nothing inflated), and what LibreOffice
loaded from the source against what the result holds."""

import tracemalloc
import zipfile
from collections import Counter

import pytest
from conftest import ROOT

from docshift.engine import vba
from docshift.engine.convert import check_export, check_package, content_lost
from docshift.errors import ConversionFailed


def package(path, parts):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for name, data in parts.items():
            out.writestr(name, data)
    return path


def refusal(path, kind="xls"):
    with pytest.raises(ConversionFailed) as failure:
        check_package(path, kind)
    assert failure.value.code == "output_invalid"
    return failure.value.message


def test_a_plain_package_passes(tmp_path):
    check_package(package(tmp_path / "ok.xlsx", {"[Content_Types].xml": "<Types/>", "xl/workbook.xml": "<w/>"}),
                  "xls")


def test_a_decompression_bomb_is_refused_from_its_directory(tmp_path):
    bomb = package(tmp_path / "bomb.xlsx", {"[Content_Types].xml": "<Types/>", "xl/workbook.xml": "<w/>",
                                            "xl/zeros.xml": b"\0" * (20 << 20)})
    assert "unpack to too much" in refusal(bomb)


def zip_bomb(path, member, size):
    """A .pptm whose ``member`` holds ``size`` bytes of zeros, deflated: about a thousandth of that on disk."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        out.writestr("[Content_Types].xml", "<Types/>")
        out.writestr("ppt/presentation.xml", "<p/>")
        with out.open(member, "w", force_zip64=True) as zeros:
            chunk = bytes(1 << 20)
            for _ in range(size >> 20):
                zeros.write(chunk)
    return path


def test_a_zip_bomb_is_refused_before_the_vba_project_goes_in(tmp_path):
    """What runs on LibreOffice's export first (the .ppt's VBA project put back into the .pptm) inflates nothing
    of a package whose directory promises 1 GiB: it is refused ``output_invalid`` holding a few MiB at most."""
    bomb = zip_bomb(tmp_path / "bomb.pptm", "ppt/media/zeros.bin", 1 << 30)
    before = bomb.read_bytes()
    project = vba.ppt_project(ROOT.parent / "shared" / "corpus" / "ppt" / "SimpleMacro.ppt")
    assert project is not None and len(before) < 2 << 20
    tracemalloc.start()
    try:
        with pytest.raises(ConversionFailed) as failure:
            check_export(bomb, "ppt", project)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert failure.value.code == "output_invalid" and "unpack to too much" in failure.value.message
    assert peak < 4 << 20, f"{peak >> 20} MiB held"
    assert bomb.read_bytes() == before


def test_no_zip_or_no_main_part_is_refused(tmp_path):
    (tmp_path / "junk.xlsx").write_bytes(b"not a zip")
    assert "no OOXML package" in refusal(tmp_path / "junk.xlsx")
    docx = package(tmp_path / "wrong.xlsx", {"[Content_Types].xml": "<Types/>", "word/document.xml": "<d/>"})
    assert "main part" in refusal(docx)


def test_sheet_names_may_be_cut_to_excels_31_characters():
    name = "a sheet name longer than thirty-one characters"
    assert content_lost({"sheets": [name, "b"]}, {"sheets": [name[:31], "b"]}) is None
    assert content_lost({"sheets": ["a", "b"]}, {"sheets": ["a"]}) == "sheets ['a'] instead of ['a', 'b']"


def test_slides_must_all_be_there():
    assert content_lost({"slides": 3}, {"slides": 3}) is None
    assert content_lost({"slides": 3}, {"slides": 2}) == "2 slides instead of 3"


def test_text_keeps_every_character_but_a_few():
    source = Counter("x" * 10_000)
    assert content_lost({"text": source}, {"text": Counter("x" * 9_982)}) is None  # 8 + 0.1%
    assert content_lost({"text": source}, {"text": Counter("x" * 9_981)}) == \
        "19 of 10000 characters of text are missing"
    assert content_lost({"text": source}, {"text": Counter("y" * 10_000)}) is not None  # replaced, not kept


def test_fields_results_are_set_aside_only_where_the_text_differs():
    """A field's result as the source kept it (Word's error text, a stored count) and as LibreOffice computed it
    again for the result: the rest of the text must all be there; without the fields' counts, the check stands."""
    own = Counter("Thewordsofthisletterarekeptwhateverthefieldsshow")
    word, libreoffice = Counter("Error!Nobookmarknamegiven." * 4 + "2414"), Counter("Error:Referencesourcenotfound0")
    loaded = {"text": own + word, "computed": word}
    written = {"text": own + libreoffice, "computed": libreoffice}
    assert content_lost(loaded, written) is None
    assert content_lost({"text": own + word}, {"text": own + libreoffice}) == \
        "90 of 156 characters of text are missing"
    # text of the letter's own that is gone is a loss still
    kept = own - Counter("Thewordsofthis")
    assert content_lost(loaded, {"text": kept + libreoffice, "computed": libreoffice}) == \
        "14 of 156 characters of text are missing"


FIELDS_DOCUMENT = (
    '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p>'
    '<w:r><w:t>Own words</w:t></w:r>'
    '<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText> REF mark </w:instrText></w:r>'
    '<w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>Result</w:t></w:r>'
    '<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText> PAGE </w:instrText></w:r>'
    '<w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>7</w:t></w:r><w:r><w:fldChar w:fldCharType="end"/></w:r>'
    '<w:r><w:fldChar w:fldCharType="end"/></w:r>'
    '<w:fldSimple w:instr=" NUMCHARS "><w:r><w:t>42</w:t></w:r></w:fldSimple>'
    '<w:r><w:t>more</w:t></w:r></w:p></w:body></w:document>')


def test_a_docx_s_field_results_are_counted_apart(tmp_path):
    """A complex field's result (between separate and end, a nested field's too) and a simple field's content are
    fields' results; a field's code and the text around are not. Both readers of a result tell the same."""
    from docshift.engine import inventory, ooxml

    path = package(tmp_path / "fields.docx", {"word/document.xml": FIELDS_DOCUMENT})
    facts = ooxml.facts(path, "doc")
    assert facts["text"] == Counter("OwnwordsResult742more")
    assert facts["computed"] == Counter("Result742")
    held = inventory.of_result(path, "doc").facts()
    assert held == facts


def test_a_result_that_does_not_open_has_lost_everything():
    assert content_lost({"slides": 1}, None) == "it does not open"


# What only the source may explain: a LibreOffice that a document got code running in could add these to a result


def rewritten(result, tmp_path, changes):
    """A copy of the OOXML package ``result`` with parts replaced or added."""
    out = tmp_path / f"rewritten{result.suffix}"
    with zipfile.ZipFile(result) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for entry in source.infolist():
            if entry.filename not in changes:
                target.writestr(entry, source.read(entry))
        for name, data in changes.items():
            target.writestr(name, data)
    return out


SETTINGS_RELS = (
    '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
    'relationships"><Relationship Id="rId9" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
    'relationships/{kind}" Target="{target}" TargetMode="External"/></Relationships>')


@pytest.fixture(scope="module")
def converted_doc(office, legacy, tmp_path_factory):
    from docshift.engine.convert import convert

    return convert(office, legacy["doc"], "doc", tmp_path_factory.mktemp("explained"), 60).path


def test_a_remote_template_the_source_does_not_name_is_refused(converted_doc, legacy, tmp_path):
    from docshift.engine.unexplained import unexplained

    assert unexplained(converted_doc, legacy["doc"], "doc") is None
    planted = rewritten(converted_doc, tmp_path, {"word/_rels/settings.xml.rels": SETTINGS_RELS.format(
        kind="attachedTemplate", target="https://reader-tracking.example/t.dotm")})
    assert "external location" in unexplained(planted, legacy["doc"], "doc")
    # a hyperlink opens only when a reader clicks it
    linked = rewritten(converted_doc, tmp_path, {"word/_rels/settings.xml.rels": SETTINGS_RELS.format(
        kind="hyperlink", target="https://example.org/somewhere")})
    assert unexplained(linked, legacy["doc"], "doc") is None


def test_a_link_that_names_no_place_needs_no_explaining(converted_doc, legacy, tmp_path):
    """LibreOffice writes "?" as the path of an external workbook whose path in the .xls is empty (a SUPBOOK of
    POI's test data ``external_name.xls``, which was refused): it reaches nothing. A host does need explaining."""
    from docshift.engine.unexplained import unexplained

    nowhere = rewritten(converted_doc, tmp_path, {"word/_rels/settings.xml.rels": SETTINGS_RELS.format(
        kind="externalLinkPath", target="%3F")})
    assert unexplained(nowhere, legacy["doc"], "doc") is None
    host = rewritten(converted_doc, tmp_path, {"word/_rels/settings.xml.rels": SETTINGS_RELS.format(
        kind="externalLinkPath", target="%5C%5C10.9.8.7%5C%3F")})
    assert "external location" in unexplained(host, legacy["doc"], "doc")


def test_links_written_in_either_encoding_are_each_explained_whatever_their_order(converted_doc, legacy, tmp_path):
    """A workbook may link hundreds of others: each string is searched once, and the encoding that held the last
    one first. Paths the source writes in 8-bit and in UTF-16, in any order, are each explained; one it does not
    write is refused wherever it comes."""
    from docshift.engine.unexplained import unexplained

    source = tmp_path / "links.doc"
    source.write_bytes(legacy["doc"].read_bytes() + b"\\\\fileserver-one\\budgets\\q1.xls\0" +
                       "\\\\fileserver-two\\planning\\q2.xls".encode("utf-16-le") + b"\0\0")
    written = ["file://fileserver-one/budgets/q1.xls", "file://fileserver-two/planning/q2.xls"]

    def rels(targets):
        body = "".join(f'<Relationship Id="rId{n}" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
                       f'relationships/externalLinkPath" Target="{target}" TargetMode="External"/>'
                       for n, target in enumerate(targets, 1))
        return rewritten(converted_doc, tmp_path, {"word/_rels/settings.xml.rels": (
            '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/'
            f'package/2006/relationships">{body}</Relationships>')})

    for order in (written, written[::-1], written * 2):
        assert unexplained(rels(order), source, "doc") is None
        for at in range(len(order) + 1):
            planted = [*order[:at], "file://elsewhere-host/report.xls", *order[at:]]
            assert "external location" in unexplained(rels(planted), source, "doc")


def test_a_vba_project_the_source_does_not_carry_is_refused(converted_doc, legacy, tmp_path):
    from docshift.engine.unexplained import unexplained

    planted = rewritten(converted_doc, tmp_path, {"word/vbaProject.bin": b"\xd0\xcf\x11\xe0" + b"\0" * 508})
    assert "VBA project" in unexplained(planted, legacy["doc"], "doc")


def test_a_link_the_source_holds_is_kept(office, linked_doc, tmp_path):
    """The linked picture of a .doc stays a link (never fetched): the source names it, so it passes."""
    from docshift.engine.convert import convert

    path, port = linked_doc
    result = convert(office, path, "doc", tmp_path, 60).path
    with zipfile.ZipFile(result) as package:
        rels = package.read("word/_rels/document.xml.rels").decode()
    assert 'TargetMode="External"' in rels and f"127.0.0.1:{port}" in rels


def test_sheet_names_that_ooxml_escapes_pass_and_their_sheets_are_mended(office, tmp_path):
    """A sheet name with a control character, or with a literal ``_x0041_``, is written with OOXML's ``_xHHHH_``
    escapes (``_x001C_``; ``_x005F_`` for the underscore). The check reads them resolved, so the result is not
    refused for a loss it does not have, and the mends that find a sheet by its .xls name find it: the TRUE
    typed into the first sheet stays a value (``sheet_constants``)."""
    import xlwt

    from docshift.engine import ooxml
    from docshift.engine.convert import convert

    names = ["a_x0041_b", "c\x1cd", "plain"]
    book = xlwt.Workbook()
    for name in names:
        book.add_sheet(name).write(0, 0, True)
    book.save(str(tmp_path / "escaped.xls"))
    converted = convert(office, tmp_path / "escaped.xls", "xls", tmp_path / "work", 60)
    with zipfile.ZipFile(converted.path) as package:
        listed = package.read("xl/workbook.xml").decode().lower()
        sheets = [package.read(f"xl/worksheets/sheet{n}.xml") for n in (1, 2, 3)]
    assert 'name="a_x005f_x0041_b"' in listed and 'name="c_x001c_d"' in listed
    assert ooxml.facts(converted.path, "xls") == {"sheets": names}
    assert [b"TRUE()" in sheet for sheet in sheets] == [False, False, False]
    assert converted.fidelity["complete"], converted.fidelity["lost"]


def test_an_external_workbook_in_a_source_libreoffice_wrote_is_explained(office, tmp_path):
    """An .xls that LibreOffice wrote holds an external workbook's path with its '#' and '%' escaped once
    ("Kosten%231", "Plan%25"), and its .xlsx escapes that '%' again ("Kosten%2525231"). Each decoding of the
    target is looked for, so the link is explained and kept, where the fully decoded path ("Kosten#1") alone was
    not in the source and the workbook was refused as output_invalid."""
    from conftest import _soffice_save, flat_odf

    from docshift.engine.convert import convert

    cell = ("<table:table table:name=\"Sheet1\"><table:table-row><table:table-cell table:formula=\"of:=['file:///"
            "srv/share/Kosten%25231/Plan%2525(9712).xls'#$Sheet1.A1]\" office:value-type=\"float\" office:value=\"7\">"
            "<text:p>7</text:p></table:table-cell></table:table-row></table:table>")
    formulas = 'xmlns:of="urn:oasis:names:tc:opendocument:xmlns:of:1.2" '  # the namespace of the formula's "of:"
    (tmp_path / "linked.fods").write_text(flat_odf("spreadsheet", cell).replace("xmlns:", formulas + "xmlns:", 1))
    source = _soffice_save(tmp_path / "linked.fods", "xls", tmp_path)
    assert b"Kosten%231\x03Plan%25(9712).xls" in source.read_bytes()
    result = convert(office, source, "xls", tmp_path / "work", 60).path
    with zipfile.ZipFile(result) as package:
        rels = package.read("xl/externalLinks/_rels/externalLink1.xml.rels").decode()
    assert '/srv/share/Kosten%2525231/Plan%252525(9712).xls" TargetMode="External"' in rels


def test_a_workbook_with_a_scenario_converts_and_keeps_it(office, tmp_path):
    """Excel's Scenario Manager keeps a sheet's scenarios in SCENARIO records; LibreOffice loads each as a sheet of
    its own, and its .xlsx export writes it as the sheet's ``scenarios``, as OOXML holds them. The check compared
    the loaded sheets with the result's and refused the workbook as output_invalid, where a plain soffice converts
    it: a scenario is no sheet of what was loaded."""
    from conftest import _soffice_save, flat_odf

    from docshift.engine.convert import convert

    def row(*cells):
        return "<table:table-row>" + "".join(cells) + "</table:table-row>"

    def number(value):
        return f'<table:table-cell office:value-type="float" office:value="{value}"><text:p>{value}</text:p>' \
               "</table:table-cell>"

    model = ('<table:table table:name="Model">' + row(number(10)) + row(number(100)) + "</table:table>")
    scenario = ('<table:table table:name="Best case"><table:scenario table:display-border="true" '
                'table:copy-back="true" table:copy-styles="true" table:copy-formulas="true" table:is-active="false" '
                'table:scenario-ranges="Model.A1:Model.A2" table:comment="optimistic"/>'
                + row(number(12)) + row(number(150)) + "</table:table>")
    (tmp_path / "scenario.fods").write_text(flat_odf("spreadsheet", model + scenario))
    source = _soffice_save(tmp_path / "scenario.fods", "xls", tmp_path)
    assert b"\xaf\x00" in source.read_bytes() and b"Best case" in source.read_bytes()  # its SCENARIO record
    converted = convert(office, source, "xls", tmp_path / "work", 60)
    with zipfile.ZipFile(converted.path) as result:
        assert b"<sheet " in result.read("xl/workbook.xml") and b'name="Best case"' not in \
            result.read("xl/workbook.xml")
        scenarios = result.read("xl/worksheets/sheet1.xml")
    assert b'<scenario name="Best case"' in scenarios and b'<inputCells r="A1" val="12"/>' in scenarios
    assert converted.fidelity["counts"]["sheets"] == {"source": 1, "result": 1}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]

"""The facts of an OOXML result, read from its XML as a stream (``docshift.engine.ooxml``): packages
made here, part by part, including the odd and the broken."""

import zipfile

import pytest
from conftest import ROOT

from docshift.engine import convert, inventory, ooxml, stored, vba
from docshift.engine.convert import content_lost
from docshift.errors import ConversionFailed, ResultUnreadable

S = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
P = ('xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" '
     'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"')
W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
RELS = 'xmlns="http://schemas.openxmlformats.org/package/2006/relationships"'
PROJECT = vba.ppt_project(ROOT.parent / "shared" / "corpus" / "ppt" / "SimpleMacro.ppt")


def facts(path, kind):
    """The facts of the output check, as ``ooxml.facts`` reads them. The check takes them from the result's
    inventory first, which read the same parts: it agrees, and it has none for what would not open."""
    read = ooxml.facts(path, kind)
    from_inventory = inventory.of_result(path, kind).facts()
    assert from_inventory == read or (from_inventory is None and read is not None)
    return read


def package(path, parts):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        out.writestr("[Content_Types].xml", "<Types/>")
        for name, data in parts.items():
            out.writestr(name, data)
    return path


def workbook(*sheets):
    listed = "".join(f'<sheet name="{name}" sheetId="{n}"/>' for n, name in enumerate(sheets, 1))
    return f'<?xml version="1.0"?><workbook {S}><sheets>{listed}</sheets></workbook>'


def document(body):
    return f'<?xml version="1.0"?><w:document {W}><w:body>{body}</w:body></w:document>'


def test_sheets_in_order_with_chart_sheets_and_escaped_names(tmp_path):
    """XML's escapes and OOXML's ``_xHHHH_`` ones (a control character; ``_x005F_`` an underscore) resolved."""
    xlsx = package(tmp_path / "a.xlsx", {"xl/workbook.xml": workbook(
        "Data", "Chart1", "R&amp;D &lt;2024&gt;", "c_x001C_d", "a_x005F_x0041_b", "_x00zz_")})
    assert facts(xlsx, "xls") == {"sheets": ["Data", "Chart1", "R&D <2024>", "c\x1cd", "a_x0041_b", "_x00zz_"]}


def test_sheets_of_another_namespace_are_not_counted(tmp_path):
    foreign = '<workbook xmlns="urn:other"><sheets><sheet name="x"/></sheets></workbook>'
    assert facts(package(tmp_path / "a.xlsx", {"xl/workbook.xml": foreign}), "xls") == {"sheets": []}


def test_slides_count_only_when_their_part_is_there(tmp_path):
    presentation = (f'<p:presentation {P}><p:sldIdLst><p:sldId id="256" r:id="rId2"/>'
                    f'<p:sldId id="257" r:id="rId3"/><p:sldId id="258" r:id="rId9"/></p:sldIdLst></p:presentation>')
    rels = (f'<Relationships {RELS}><Relationship Id="rId2" Type="slide" Target="slides/slide1.xml"/>'
            f'<Relationship Id="rId3" Type="slide" Target="slides/slide2.xml"/></Relationships>')
    parts = {"ppt/presentation.xml": presentation, "ppt/_rels/presentation.xml.rels": rels,
             "ppt/slides/slide1.xml": "<sld/>"}
    assert facts(package(tmp_path / "one.pptx", parts), "ppt") == {"slides": 1}
    parts["ppt/slides/slide2.xml"] = "<sld/>"
    assert facts(package(tmp_path / "two.pptx", parts), "ppt") == {"slides": 2}  # rId9 has no relationship
    parts["ppt/_rels/presentation.xml.rels"] = rels.replace('"slides/slide2.xml"', '"/ppt/slides/slide2.xml"')
    assert facts(package(tmp_path / "absolute.pptx", parts), "ppt") == {"slides": 2}  # a target from the root


def test_text_counts_runs_deletions_symbols_and_hyphens_but_no_whitespace(tmp_path):
    body = ('<w:p><w:r><w:t xml:space="preserve">ab  c</w:t><w:tab/><w:t>d&amp;</w:t></w:r>'
            '<w:del><w:r><w:delText>gone</w:delText></w:r></w:del>'
            '<w:r><w:sym w:font="Symbol" w:char="F0B7"/><w:softHyphen/><w:noBreakHyphen/></w:r>'
            '<w:r><w:instrText>PAGE</w:instrText></w:r></w:p>')
    found = facts(package(tmp_path / "a.docx", {"word/document.xml": document(body)}), "doc")
    assert found["text"] == {"a": 1, "b": 1, "c": 1, "d": 1, "&": 1, "g": 1, "o": 1, "n": 1, "e": 1,
                             "\uf0b7": 1, "\u00ad": 1, "\u2011": 1}


def test_text_split_across_chunks_is_counted_once(tmp_path):
    words = " ".join(f"word{n}" for n in range(40_000))  # far more than one chunk of the stream
    found = facts(package(tmp_path / "a.docx", {"word/document.xml": document(f"<w:p><w:r><w:t>{words}</w:t>"
                                                                               "</w:r></w:p>")}), "doc")
    assert sum(found["text"].values()) == len(words.replace(" ", ""))
    assert content_lost({"text": found["text"]}, found) is None


def test_what_would_not_open_has_no_facts(tmp_path):
    assert facts(package(tmp_path / "a.xlsx", {"xl/other.xml": workbook("a")}), "xls") is None  # no workbook
    assert facts(package(tmp_path / "b.docx", {"word/document.xml": "<w:document><w:body>"}), "doc") is None
    presentation = f'<p:presentation {P}><p:sldIdLst/></p:presentation>'
    assert facts(package(tmp_path / "c.pptx", {"ppt/presentation.xml": presentation}), "ppt") is None  # no rels
    (tmp_path / "d.xlsx").write_bytes(b"PK\x03\x04 not really")
    assert facts(tmp_path / "d.xlsx", "xls") is None
    assert content_lost({"sheets": ["a"]}, facts(tmp_path / "d.xlsx", "xls")) == "it does not open"


def test_a_dtd_is_refused_before_any_entity_expands(tmp_path):
    laughs = ('<?xml version="1.0"?><!DOCTYPE w [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>'
              f'<w:document {W}><w:body><w:p><w:r><w:t>&b;</w:t></w:r></w:p></w:body></w:document>')
    assert facts(package(tmp_path / "a.docx", {"word/document.xml": laughs}), "doc") is None


def test_a_loss_shows_against_the_source(tmp_path):
    xlsx = package(tmp_path / "a.xlsx", {"xl/workbook.xml": workbook("one")})
    assert content_lost({"sheets": ["one", "two"]}, facts(xlsx, "xls")) == "sheets ['one'] instead of ['one', 'two']"


# Every reader of a result's XML refuses a DTD: the output checks above, the stored values written back into a
# workbook (``stored``), the parts edited to put a presentation's VBA project back (``vba.insert_project``)

SHEET_ID = 'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"'
# the entity ``name``, plain or a billion laughs (each level ten times the one before: 3 GB of "lol")
DTDS = {"an entity": '<!DOCTYPE x [<!ENTITY name "Sheet1">]>',
        "billion laughs": '<!DOCTYPE x [<!ENTITY l0 "lol">' + "".join(
            f'<!ENTITY l{n} "{f"&l{n - 1};" * 10}">' for n in range(1, 10)) + '<!ENTITY name "&l9;">]>'}


def with_dtd(xml, dtd):
    """``xml`` with ``dtd`` after its declaration, and its entity in the text of the root element."""
    declaration, rest = xml.split("?>", 1)
    if rest.endswith("/>"):
        opening = rest[:-2]
        rest = f"{opening}></{opening[1:].split()[0]}>"
    close = rest.rindex("</")
    return f"{declaration}?>{dtd}{rest[:close]}&name;{rest[close:]}"


def stored_workbook(path, dtd, part):
    """An .xlsx with one formula cell, ``part`` declaring ``dtd``."""
    parts = {"xl/workbook.xml": f'<?xml version="1.0"?><workbook {S} {SHEET_ID}><sheets>'
                                '<sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>',
             "xl/_rels/workbook.xml.rels": f'<?xml version="1.0"?><Relationships {RELS}><Relationship Id="rId1" '
                                           'Type="worksheet" Target="worksheets/sheet1.xml"/></Relationships>',
             "xl/worksheets/sheet1.xml": f'<?xml version="1.0"?><worksheet {S}><sheetData><row r="1">'
                                         '<c r="A1"><f>UDF()</f><v>1</v></c></row></sheetData></worksheet>'}
    parts[part] = with_dtd(parts[part], dtd)
    return package(path, parts)


@pytest.mark.parametrize("prefix", ["", "x:"], ids=["libreoffice-layout", "prefixed"])
def test_the_cells_an_array_formula_fills_are_formula_cells(tmp_path, prefix):
    """Only an array formula's or a data table's first cell has an ``<f>``; the others of its range hold its
    results too, and a single-cell array adds nothing. Both the regular expression and expat read it so."""
    namespace = S.replace("xmlns=", f"xmlns:{prefix[:-1]}=") if prefix else S
    x = prefix
    rows = (f'<{x}row r="1"><{x}c r="B1"><{x}f t="array" ref="B1:C2">ROW(A1:B2)</{x}f><{x}v>1</{x}v></{x}c>'
            f'<{x}c r="C1"><{x}v>1</{x}v></{x}c><{x}c r="D1"><{x}f t="array" ref="D1:D1">1</{x}f><{x}v>1</{x}v></{x}c>'
            f'<{x}c r="E1"><{x}f t="dataTable" ref="E1:E2" dt2D="0" dtr="0" r1="A1"/><{x}v>3</{x}v></{x}c>'
            f'</{x}row><{x}row r="2"><{x}c r="B2"><{x}v>2</{x}v></{x}c><{x}c r="C2"><{x}v>2</{x}v></{x}c>'
            f'<{x}c r="D2"><{x}v>2</{x}v></{x}c><{x}c r="E2"><{x}v>2</{x}v></{x}c></{x}row>')
    parts = {"xl/workbook.xml": f'<?xml version="1.0"?><workbook {S} {SHEET_ID}><sheets>'
                                '<sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>',
             "xl/_rels/workbook.xml.rels": f'<?xml version="1.0"?><Relationships {RELS}><Relationship Id="rId1" '
                                           'Type="worksheet" Target="worksheets/sheet1.xml"/></Relationships>'}
    parts["xl/worksheets/sheet1.xml"] = (f'<?xml version="1.0"?><{x}worksheet {namespace}><{x}sheetData>{rows}'
                                         f'</{x}sheetData></{x}worksheet>')
    held = inventory.of_result(package(tmp_path / "other.xlsx", parts), "xls")
    assert held.cells["Sheet1"][b"C2"] == 2.0
    assert held.formulas["Sheet1"] == {b"B1", b"C1", b"B2", b"C2", b"D1", b"E1", b"E2"}


@pytest.mark.parametrize("dtd", sorted(DTDS))
@pytest.mark.parametrize("part", ["xl/workbook.xml", "xl/_rels/workbook.xml.rels"])
def test_writing_stored_values_back_refuses_a_dtd(tmp_path, part, dtd):
    xlsx = stored_workbook(tmp_path / "a.xlsx", DTDS[dtd], part)
    before = xlsx.read_bytes()
    source = inventory.Inventory("xls", {}, cells={"Sheet1": {b"A1": 2.0}})
    result = inventory.Inventory("xls", {}, cells={"Sheet1": {b"A1": 1.0}}, formulas={"Sheet1": {b"A1"}})
    assert stored.differing(source, result) == {"Sheet1": {b"A1": 2.0}}
    with pytest.raises(ResultUnreadable, match="declares a DTD"):
        stored.restore(xlsx, source, result)
    assert xlsx.read_bytes() == before


def presentation(path, dtd, part):
    """A .pptm as LibreOffice would write it without a project, ``part`` (if any) declaring ``dtd``."""
    types = f'<Types xmlns="{vba.CT_NS}"><Default Extension="xml" ContentType="application/xml"/></Types>'
    parts = {"[Content_Types].xml": f'<?xml version="1.0"?>{types}',
             "_rels/.rels": f'<?xml version="1.0"?><Relationships {RELS}><Relationship Id="rId1" '
                            f'Type="{vba.OFFICE_DOCUMENT}" Target="ppt/presentation.xml"/></Relationships>',
             "ppt/_rels/presentation.xml.rels": f'<?xml version="1.0"?><Relationships {RELS}/>',
             "ppt/presentation.xml": f'<?xml version="1.0"?><p:presentation {P}/>'}
    if part is not None:
        parts[part] = with_dtd(parts[part], dtd)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for name, data in parts.items():
            out.writestr(name, data)
    return path


@pytest.mark.parametrize("dtd", sorted(DTDS))
@pytest.mark.parametrize("part", ["[Content_Types].xml", "_rels/.rels", "ppt/_rels/presentation.xml.rels"])
def test_putting_a_vba_project_back_refuses_a_dtd(tmp_path, part, dtd):
    pptm = presentation(tmp_path / "a.pptm", DTDS[dtd], part)
    before = pptm.read_bytes()
    with pytest.raises(ResultUnreadable, match="declares a DTD"):
        vba.insert_project(pptm, PROJECT)
    assert pptm.read_bytes() == before
    # in the conversion, that is output_invalid
    with pytest.raises(ConversionFailed) as failure:
        convert.check_export(pptm, "ppt", PROJECT)
    assert failure.value.code == "output_invalid"


def test_a_presentation_without_a_dtd_takes_its_project(tmp_path):
    pptm = presentation(tmp_path / "a.pptm", None, None)
    convert.check_export(pptm, "ppt", PROJECT)
    assert sorted(vba.modules(pptm)) == ["Module1"]


def test_edited_tags_change_only_what_the_edit_names():
    """Attributes set, added and left out in the start tags the edit picks; '>' inside a value, single quotes,
    character references and the declaration stay byte for byte; a new value is escaped."""
    part = (b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<a:root xmlns:a="urn:a" xmlns:r="urn:r">'
            b"<a:obj r:id='rId1' progId=\"Old\" alt=\"x > y&#13;&#10;\"/><a:obj\n  r:id=\"rId2\"  progId=\"Keep\" >"
            b"text &amp; more</a:obj><a:obj r:id=\"rId3\"/></a:root>")

    def edit(tag, attributes):
        if tag != "urn:a}obj":
            return None
        return {"rId1": {"progId": None, "title": 'a "quoted" & <odd>\tone'}, "rId2": {},
                "rId3": {"progId": "Excel.Sheet.8"}}[attributes["urn:r}id"]]

    assert ooxml.edit_tags(part, "part.xml", edit) == (
        b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<a:root xmlns:a="urn:a" xmlns:r="urn:r">'
        b"<a:obj r:id='rId1' alt=\"x > y&#13;&#10;\" title=\"a &quot;quoted&quot; &amp; &lt;odd&gt;&#9;one\"/>"
        b"<a:obj\n  r:id=\"rId2\"  progId=\"Keep\" >text &amp; more</a:obj>"
        b"<a:obj r:id=\"rId3\" progId=\"Excel.Sheet.8\"/></a:root>")
    assert ooxml.edit_tags(part, "part.xml", lambda tag, attributes: None) == part
    with pytest.raises(ResultUnreadable):
        ooxml.edit_tags(part[:-3], "part.xml", edit)
    with pytest.raises(ResultUnreadable):
        ooxml.edit_tags(b'<!DOCTYPE a [<!ENTITY e "x">]><a:root xmlns:a="urn:a">&e;</a:root>', "part.xml", edit)


def test_a_part_edited_as_a_dom_keeps_the_line_breaks_of_its_attributes():
    """minidom's own writer puts a line break of an attribute as it is, and the next reader makes it a space: an
    alternative text written on two lines came back on one. Written by ``serialize``, the part reads as it did."""
    from xml.dom import minidom
    from xml.etree.ElementTree import canonicalize

    part = (b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<p:sld xmlns:p="urn:p"><p:cNvPr id="2" '
            b'descr="line one&#13;&#10;line two&#9;tabbed &quot;q&quot; &amp; &lt;"/><p:t>x &amp; y &lt; z &gt; '
            b'w&#13;</p:t><!-- a comment --><?target data?><p:e/><![CDATA[<raw>]]></p:sld>')
    written = ooxml.serialize(minidom.parseString(part))
    assert written.startswith(b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<p:sld ')
    assert canonicalize(written) == canonicalize(part)
    assert b'descr="line one&#13;&#10;line two&#9;tabbed' in written

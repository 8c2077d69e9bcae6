"""The facts of an OOXML result, read from its XML as a stream (``docshift.engine.ooxml``): packages
made here, part by part, including the odd and the broken."""

import zipfile

from docshift.engine import inventory, ooxml
from docshift.engine.convert import content_lost

S = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
P = ('xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" '
     'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"')
W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
RELS = 'xmlns="http://schemas.openxmlformats.org/package/2006/relationships"'


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
    xlsx = package(tmp_path / "a.xlsx", {"xl/workbook.xml": workbook("Data", "Chart1", "R&amp;D &lt;2024&gt;")})
    assert facts(xlsx, "xls") == {"sheets": ["Data", "Chart1", "R&D <2024>"]}


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

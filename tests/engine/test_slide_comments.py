"""A deck's comments, written as well-formed XML (``docshift/engine/slide_comments.py``).

LibreOffice 25.2's PPTX export writes a comment's text unescaped: "R&D" and "<draft>" make the comments part XML
that no reader accepts. The suite's deck, a flat ODF presentation saved as a .ppt by LibreOffice, has one comment
holding both, by an author whose name holds them too (which LibreOffice escapes)."""

import xml.dom.minidom
import zipfile

import pytest
from conftest import _soffice_save as soffice
from conftest import flat_odf

from docshift.engine import convert, slide_comments

TEXT = 'R&D budget <draft> "quoted" & done'
DC = 'xmlns:dc="http://purl.org/dc/elements/1.1/"'


@pytest.fixture(scope="module")
def deck(tmp_path_factory):
    out = tmp_path_factory.mktemp("comments")
    page = ('<draw:page draw:name="p1"><office:annotation svg:x="1cm" svg:y="1cm" svg:width="4cm" svg:height="2cm">'
            f'<dc:creator {DC}>Q&amp;A &lt;Team&gt;</dc:creator><dc:date {DC}>2020-01-01T10:00:00</dc:date>'
            '<text:p>R&amp;D budget &lt;draft&gt; "quoted" &amp; done</text:p></office:annotation></draw:page>')
    (out / "commented.fodp").write_text(flat_odf("presentation", page))
    return soffice(out / "commented.fodp", "ppt:MS PowerPoint 97", out)


def comments(result):
    """The text of every comment of the .pptx ``result``, each part parsed as XML (which fails if it is not XML)."""
    with zipfile.ZipFile(result) as package:
        parts = [name for name in package.namelist() if slide_comments.COMMENTS.fullmatch(name)]
        texts = []
        for name in parts:
            document = xml.dom.minidom.parseString(package.read(name))
            texts += ["".join(node.data for node in text.childNodes if node.nodeType == node.TEXT_NODE)
                      for text in document.getElementsByTagName("p:text")]
        return texts


def test_libreoffice_writes_the_comment_unescaped(deck, tmp_path):
    """What the mend is for: a plain soffice's comments part is not XML. A LibreOffice that writes it escaped
    fails this test on purpose: the mend may then go."""
    with pytest.raises(Exception, match="not well-formed"):
        comments(soffice(deck, "pptx", tmp_path / "plain"))


def test_a_comment_holding_markup_characters_is_written_as_xml_with_its_text(office, deck, tmp_path):
    converted = convert.convert(office, deck, "ppt", tmp_path / "work", 60)
    assert comments(converted.path) == [TEXT]
    assert converted.fidelity["counts"]["comments"] == {"source": 1, "result": 1}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]
    with zipfile.ZipFile(converted.path) as package:
        assert b'name="Q&amp;A &lt;Team&gt;"' in package.read("ppt/commentAuthors.xml")


def test_escaped_text_is_left_as_it_is(tmp_path):
    """A comment already escaped (as a later LibreOffice may write it) is not escaped twice; the part is untouched."""
    part = (b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><p:cmLst xmlns:p="http://schemas.openxmlformats.org/'
            b'presentationml/2006/main"><p:cm authorId="0" idx="1"><p:text>R&amp;D &lt;draft&gt; &#233;</p:text>'
            b'</p:cm></p:cmLst>')
    path = tmp_path / "escaped.pptx"
    with zipfile.ZipFile(path, "w") as package:
        package.writestr("ppt/comments/comment1.xml", part)
    assert slide_comments.mend(path, "ppt") == 0
    with zipfile.ZipFile(path) as package:
        assert package.read("ppt/comments/comment1.xml") == part

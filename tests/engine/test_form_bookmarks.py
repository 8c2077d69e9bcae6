"""The bookmark Word keeps around each form field (a ``REF`` to it, a macro's ``FormFields("Text1")``): LibreOffice's
export leaves it out; the result gets it back where the .doc has it."""

import re
import zipfile

from conftest import ROOT
from conftest import _soffice_save as soffice

from docshift.engine import convert, form_bookmarks
from docshift.engine.form_bookmarks import _Taken
from docshift.engine.inventory.package import NS_W

CORPUS = ROOT.parent / "shared" / "corpus" / "doc"
MARK = re.compile(r'<field:fieldmark-start text:name="([^"]*)"')


def bookmarks(result):
    """[(name, whether a form field's begin run follows it)] of the bookmarks of the .docx ``result``'s body."""
    with zipfile.ZipFile(result) as package:
        body = package.read("word/document.xml").decode()
    return [(match.group(2), body.startswith('<w:r><w:fldChar w:fldCharType="begin"><w:ffData>', match.end()))
            for match in re.finditer(r'<w:bookmarkStart\b[^>]*w:id="([0-9]+)" w:name="([^"]*)"/>', body)]


def test_a_form_s_fields_keep_their_bookmarks(office, tmp_path):
    """Bug47286.doc's 12 text form fields are bookmarks Text1 to Text12 of the .doc. A plain soffice's .docx names
    the fields and has no bookmark; docshift's has each bookmark around its field, and LibreOffice reads from it
    the 12 form fields it reads from the .doc."""
    source = CORPUS / "Bug47286.doc"
    assert bookmarks(soffice(source, "docx", tmp_path / "plain")) == []
    converted = convert.convert(office, source, "doc", tmp_path / "work", 60)
    assert bookmarks(converted.path) == [(f"Text{number}", True) for number in range(1, 13)]
    with zipfile.ZipFile(converted.path) as package:
        body = package.read("word/document.xml")
    assert body.count(b"<w:bookmarkEnd ") == 12
    legacy = MARK.findall(soffice(source, "fodt", tmp_path / "legacy").read_text())
    assert len(legacy) == 12 and MARK.findall(soffice(converted.path, "fodt", tmp_path / "read").read_text()) == legacy
    assert converted.fidelity["complete"] is True


def test_a_bookmark_goes_around_the_runs_of_a_named_form_field_only():
    """Before the run that begins the field, after the run that ends it (a field nested in its result inside);
    not for a field the .doc has no bookmark of, nor for one the document already has; ids after the document's."""
    def field(name, inner=""):
        data = f'<w:ffData><w:name w:val="{name}"/></w:ffData>' if name is not None else ""
        return (f'<w:r><w:fldChar w:fldCharType="begin">{data}</w:fldChar></w:r>'
                '<w:r><w:instrText> FORMTEXT </w:instrText></w:r><w:r><w:fldChar w:fldCharType="separate"/></w:r>'
                f'{inner}<w:r><w:t>x</w:t></w:r><w:r><w:fldChar w:fldCharType="end"/></w:r>')

    date = ('<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText> DATE </w:instrText></w:r>'
            '<w:r><w:fldChar w:fldCharType="end"/></w:r>')
    body = (f'<w:document xmlns:w="{NS_W}"><w:body><w:p>{field("Text1", date)}</w:p><w:p>{field("Other")}'
            f'{field("Kept")}{field(None)}</w:p></w:body></w:document>').encode()
    taken = _Taken(names={"Kept"}, wanted={"Text1", "Kept", "Gone"}, next_id=5)
    edited, count = form_bookmarks.bookmarked(body, "document.xml", taken)
    assert count == 1 and taken.next_id == 6 and "Text1" in taken.names
    start = f'<w:bookmarkStart xmlns:w="{NS_W}" w:id="5" w:name="Text1"/>'.encode()
    end = f'<w:bookmarkEnd xmlns:w="{NS_W}" w:id="5"/>'.encode()
    assert edited == body.replace(b"<w:p><w:r>", b"<w:p>" + start + b"<w:r>", 1).replace(
        b'<w:fldChar w:fldCharType="end"/></w:r></w:p>', b'<w:fldChar w:fldCharType="end"/></w:r>' + end + b"</w:p>", 1)

"""The template a .doc is attached to: LibreOffice's import keeps its bare name as a property only, and the result
gets ``w:attachedTemplate`` and its relationship back from the .doc's SttbfAssoc."""

import re
import struct
import zipfile

import olefile
import pytest
from compound import with_streams
from conftest import _soffice_save as soffice
from conftest import flat_odf

from docshift.engine import convert, word_template
from docshift.engine.inventory.package import NS_W

TEMPLATE = "C:\\Program Files\\Acme\\Templates\\Letter Head.dot"
SETTINGS_RELS = "word/_rels/settings.xml.rels"


def attached(source, target, template):
    """``source`` (a .doc LibreOffice saved, which names no template) written to ``target`` with an SttbfAssoc
    whose ibstAssocDot is ``template``, at the end of its table stream."""
    with olefile.OleFileIO(str(source)) as ole:
        word, table_name = bytearray(ole.openstream("WordDocument").read()), "1Table" if ole.exists("1Table") \
            else "0Table"
        table = ole.openstream(table_name).read()
    strings = ["", template] + [""] * 16
    sttb = struct.pack("<HHH", 0xFFFF, len(strings), 0) + b"".join(
        struct.pack("<H", len(text)) + text.encode("utf_16_le") for text in strings)
    csw = struct.unpack_from("<H", word, 32)[0]
    pos = 34 + 2 * csw
    pos += 2 + 4 * struct.unpack_from("<H", word, pos)[0] + 2  # past fibRgLw and cbRgFcLcb
    struct.pack_into("<II", word, pos + 8 * word_template.PAIR_STTBF_ASSOC, len(table), len(sttb))
    return with_streams(source, target, WordDocument=bytes(word), **{table_name: table + sttb})


@pytest.fixture(scope="module")
def letter(tmp_path_factory):
    out = tmp_path_factory.mktemp("template")
    (out / "letter.fodt").write_text(flat_odf("text", "<text:p>Dear reader</text:p>"))
    return attached(soffice(out / "letter.fodt", "doc", out), out / "attached.doc", TEMPLATE)


def test_the_doc_names_its_template(letter):
    assert word_template.template_of(letter) == TEMPLATE
    assert word_template.template_of(letter.parent / "letter.doc") == ""


def settings_of(result):
    """(the settings part, its relationships part or None) of the .docx ``result``."""
    with zipfile.ZipFile(result) as package:
        names = package.namelist()
        return (package.read("word/settings.xml").decode(),
                package.read(SETTINGS_RELS).decode() if SETTINGS_RELS in names else None)


def test_a_text_keeps_its_template(office, letter, tmp_path):
    """A plain soffice's .docx is attached to no template; docshift's names the .doc's, as Word writes it, among the
    settings where the schema puts it."""
    plain, plain_rels = settings_of(soffice(letter, "docx", tmp_path / "plain"))
    assert "attachedTemplate" not in plain and plain_rels is None
    converted = convert.convert(office, letter, "doc", tmp_path / "work", 60)
    settings, rels = settings_of(converted.path)
    element = re.search(r'<w:attachedTemplate [^>]*r:id="([^"]+)"/>', settings)
    assert settings.replace(element.group(), "") == plain
    assert re.search(r"<w:settings [^>]*>(<w:zoom [^>]*/>)?<w:attachedTemplate ", settings)
    assert re.findall(r'<Relationship Id="([^"]+)" Type="[^"]*/attachedTemplate" Target="([^"]*)" '
                      r'TargetMode="External"/>', rels) == [
        (element.group(1), "file:///C:\\Program%20Files\\Acme\\Templates\\Letter%20Head.dot")]
    assert converted.fidelity["complete"] is True


@pytest.mark.parametrize(("path", "expected"), [
    ("D:\\Mascha\\Sjabloon AD.dot", "file:///D:\\Mascha\\Sjabloon%20AD.dot"),
    ("\\\\file1\\shared files\\four-images.dot", "file:///\\\\file1\\shared%20files\\four-images.dot"),
    ("Normal.dotm", "Normal.dotm"),
    ("C:\\Vorlagen\\Заявление & Co.dot", "file:///C:\\Vorlagen\\%D0%97%D0%B0%D1%8F%D0%B2%D0%BB%D0%B5%D0%BD%D0%B8%D0%B5"
                                         "%20%26%20Co.dot")])
def test_a_template_s_path_becomes_the_uri_word_writes(path, expected):
    assert word_template.target(path) == expected


def test_the_template_goes_before_the_settings_that_follow_it(letter, tmp_path):
    """After the settings CT_Settings puts before it, before the first other; a result that names a template
    already keeps its own."""
    result = tmp_path / "result.docx"
    settings = (f'<w:settings xmlns:w="{NS_W}"><w:writeProtection/><w:zoom w:percent="90"/><w:proofState/>'
                '<w:defaultTabStop w:val="708"/><w:compat/></w:settings>')
    with zipfile.ZipFile(result, "w") as package:
        package.writestr("[Content_Types].xml", '<Types xmlns="http://schemas.openxmlformats.org/package/2006/'
                                                'content-types"><Default Extension="rels" ContentType="application/'
                                                'vnd.openxmlformats-package.relationships+xml"/></Types>')
        package.writestr("word/document.xml", f'<w:document xmlns:w="{NS_W}"/>')
        package.writestr("word/_rels/document.xml.rels", (
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship '
            'Id="rId4" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/settings" '
            'Target="settings.xml"/></Relationships>'))
        package.writestr("word/settings.xml", settings)
    assert word_template.mend(result, letter, "doc") == 1
    written, rels = settings_of(result)
    assert written == settings.replace("<w:defaultTabStop", f'<w:attachedTemplate xmlns:w="{NS_W}" xmlns:r="http:/'
                                       '/schemas.openxmlformats.org/officeDocument/2006/relationships" r:id="rId1"/>'
                                       "<w:defaultTabStop")
    assert 'Id="rId1"' in rels
    before = result.read_bytes()
    assert word_template.mend(result, letter, "doc") == 0
    assert result.read_bytes() == before

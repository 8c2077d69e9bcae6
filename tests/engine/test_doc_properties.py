"""A legacy file's company, manager and category, which LibreOffice does not import, stay in the result's document
properties. Read from ``../shared/corpus``: a .doc, an .xls (its company in Shift-JIS) and two decks."""

import re
import zipfile

import olefile
import pptx
import pytest
from conftest import ROOT
from conftest import _soffice_save as soffice

from docshift.engine import convert, doc_properties
from docshift.engine.inventory import properties

CORPUS = ROOT.parent / "shared" / "corpus"
# file: (company, manager, category) as Office shows them
NAMED = {
    "doc/53379.doc": ("Gateway EMEA", None, None),
    "xls/12561-1.xls": ("アクチュエイトジャパン\uff08株\uff09", None, None),  # full-width parentheses
    "ppt/bug58733_671884.ppt": ("AIPL", "SMH", None),
    "ppt/bug45124.ppt": ("Lasting Impact", None, "Org Fit"),
}
APP = "docProps/app.xml"
CORE = "docProps/core.xml"


def shown(path):
    """(company, manager, category) of an OOXML package, from its docProps parts."""
    with zipfile.ZipFile(path) as package:
        app, core = package.read(APP).decode(), package.read(CORE).decode()

    def element(xml, name):
        found = re.search(rf"<{name}>([^<]*)</{name}>", xml)
        return found.group(1) if found else None
    return element(app, "Company"), element(app, "Manager"), element(core, "cp:category")


@pytest.mark.parametrize("name", sorted(NAMED))
def test_the_company_manager_and_category_stay(office, name, tmp_path):
    source = CORPUS / name
    assert shown(soffice(source, source.suffix[1:] + "x", tmp_path / "plain")) == (None, None, None), \
        "a plain soffice drops them"
    with olefile.OleFileIO(str(source)) as ole:
        assert set(properties.read(ole).values()) == {text for text in NAMED[name] if text}
    converted = convert.convert(office, source, source.suffix[1:], tmp_path / "work", 60)
    assert shown(converted.path) == NAMED[name]
    if name.endswith(".ppt"):  # as another program reads them
        assert pptx.Presentation(converted.path).core_properties.category == (NAMED[name][2] or "")


def test_what_a_part_has_stays_and_what_it_lacks_goes_first_in_its_prefix(tmp_path):
    """A property the part has already is left as it is; one it lacks goes first in the root, in the root's prefix,
    its text escaped; a package without the part is untouched."""
    core_ns = "http://schemas.openxmlformats.org/package/2006/metadata/core-properties"
    app = ('<Properties xmlns="http://schemas.openxmlformats.org/officeDocument/2006/extended-properties">'
           '<Company>Kept</Company></Properties>')
    core = f'<c:coreProperties xmlns:c="{core_ns}"><c:revision>1</c:revision></c:coreProperties>'
    result = tmp_path / "book.xlsx"
    with zipfile.ZipFile(result, "w") as package:
        package.writestr(APP, app)
        package.writestr(CORE, core)
    assert doc_properties.mend(result, {0x0F: "Other", 0x0E: "Ann & <Bob>", 0x02: "Plans"}) == 2
    with zipfile.ZipFile(result) as package:
        assert package.read(APP).decode() == app.replace(
            '-properties">', '-properties"><Manager>Ann &amp; &lt;Bob&gt;</Manager>')
        assert package.read(CORE).decode() == core.replace('-properties">',
                                                           '-properties"><c:category>Plans</c:category>')
    assert doc_properties.mend(result, {0x0F: "Other", 0x0E: "Ann & <Bob>", 0x02: "Plans"}) == 0
    bare = tmp_path / "bare.xlsx"
    with zipfile.ZipFile(bare, "w") as package:
        package.writestr("xl/workbook.xml", "<workbook/>")
    assert doc_properties.mend(bare, {0x0F: "Other"}) == 0


@pytest.mark.parametrize(("value", "code_page", "text"), [
    (b"Caf\xe9", 1252, "Café"), ("Café", 1252, "Café"), ("Café".encode(), -535, "Café"),  # 65001 as a VT_I2
    ("Café".encode("utf-16-le"), 1200, "Café"), (b"Acme\x00", None, "Acme"), (b"x" * 2000, 1252, None),
    (b"\x01\x02", 1252, None),
])
def test_a_property_is_read_in_its_code_page_and_nonsense_is_left_out(value, code_page, text):
    class Stream:
        def getproperties(self, name):
            assert name == properties.STREAM
            return {0x0001: code_page, 0x000F: value}
    assert properties.read(Stream()) == ({0x0F: text} if text else {})

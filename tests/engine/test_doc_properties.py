"""A legacy file's company, manager and category, which LibreOffice does not import, and an Excel 95 workbook's title,
author and the rest, which its import leaves empty, stay in the result's document properties. Read from
``../shared/corpus``: a .doc, an .xls (its company in Shift-JIS) and two decks; made here: an Excel 95 workbook."""

import re
import zipfile

import olefile
import openpyxl
import pptx
import pytest
from conftest import ROOT
from conftest import _soffice_save as soffice
from workbooks import excel_95, excel_95_file

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
        read = properties.read(ole)
    assert {read.get(element) for element in ("Company", "Manager", "category")} - {None} == \
        {text for text in NAMED[name] if text}
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
    assert doc_properties.mend(result, {"Company": "Other", "Manager": "Ann & <Bob>", "category": "Plans"}) == 2
    with zipfile.ZipFile(result) as package:
        assert package.read(APP).decode() == app.replace(
            '-properties">', '-properties"><Manager>Ann &amp; &lt;Bob&gt;</Manager>')
        assert package.read(CORE).decode() == core.replace('-properties">',
                                                           '-properties"><c:category>Plans</c:category>')
    assert doc_properties.mend(result, {"Company": "Other", "Manager": "Ann & <Bob>", "category": "Plans"}) == 0
    bare = tmp_path / "bare.xlsx"
    with zipfile.ZipFile(bare, "w") as package:
        package.writestr("xl/workbook.xml", "<workbook/>")
    assert doc_properties.mend(bare, {"Company": "Other"}) == 0


@pytest.mark.parametrize(("value", "code_page", "text"), [
    (b"Caf\xe9", 1252, "Café"), ("Café", 1252, "Café"), ("Café".encode(), -535, "Café"),  # 65001 as a VT_I2
    ("Café".encode("utf-16-le"), 1200, "Café"), (b"Acme\x00", None, "Acme"), (b"x" * 2000, 1252, None),
    (b"\x01\x02", 1252, None),
])
def test_a_property_is_read_in_its_code_page_and_nonsense_is_left_out(value, code_page, text):
    class Stream:
        def getproperties(self, name):
            if name != properties.STREAM:
                raise OSError(f"no {name} here")
            return {0x0001: code_page, 0x000F: value}
    assert properties.read(Stream()) == ({"Company": text} if text else {})


SUMMARY = {2: "Prix du café", 3: "Ventes", 4: "Zoë Martin", 5: "prix; ventes", 6: "Revu & corrigé", 8: "Ann"}
ELEMENTS = {"dc:title": 2, "dc:subject": 3, "dc:creator": 4, "cp:keywords": 5, "dc:description": 6,
            "cp:lastModifiedBy": 8}


def core_of(path):
    """{element: text} of the properties ``ELEMENTS`` names in an OOXML package's core part."""
    with zipfile.ZipFile(path) as package:
        core = package.read(CORE).decode()
    return {name: (found.group(1) if (found := re.search(rf"<{name}>([^<]*)</{name}>", core)) else None)
            for name in ELEMENTS}


def test_an_excel_95_workbook_keeps_its_title_and_author(office, tmp_path):
    """LibreOffice's Excel 95 import reads no SummaryInformation: a plain soffice writes each property empty;
    docshift's result has each, in the property set's code page, as openpyxl reads them."""
    source = excel_95_file(tmp_path / "priced.xls", excel_95("Price"), SUMMARY)
    plain = soffice(source, "xlsx", tmp_path / "plain")
    assert set(core_of(plain).values()) <= {"", None}
    converted = convert.convert(office, source, "xls", tmp_path / "work", 60)
    assert core_of(converted.path) == {name: SUMMARY[key].replace("&", "&amp;") for name, key in ELEMENTS.items()}
    read = openpyxl.load_workbook(converted.path).properties
    assert (read.title, read.creator, read.lastModifiedBy, read.description) == (SUMMARY[2], SUMMARY[4], SUMMARY[8],
                                                                                 SUMMARY[6])


def test_an_empty_element_is_given_its_text_and_a_missing_one_its_namespace_s_prefix(tmp_path):
    """An element LibreOffice wrote empty gets the text, one with text keeps it, one missing goes first in the prefix
    the root declares for its namespace, or declares its namespace where the root does not."""
    core = ('<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" '
            'xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:creator></dc:creator><dc:title>Kept</dc:title>'
            '<cp:lastModifiedBy/></cp:coreProperties>')
    result = tmp_path / "book.xlsx"
    with zipfile.ZipFile(result, "w") as package:
        package.writestr(CORE, core)
    given = {"creator": "Zoë", "title": "Other", "lastModifiedBy": "Ann", "subject": "Sales"}
    assert doc_properties.mend(result, given) == 3
    with zipfile.ZipFile(result) as package:
        assert package.read(CORE).decode() == core.replace(
            'elements/1.1/"><dc:creator></dc:creator>', 'elements/1.1/"><dc:subject>Sales</dc:subject>'
            '<dc:creator>Zoë</dc:creator>').replace("<cp:lastModifiedBy/>",
                                                   "<cp:lastModifiedBy>Ann</cp:lastModifiedBy>")
    bare = tmp_path / "bare.xlsx"
    with zipfile.ZipFile(bare, "w") as package:
        package.writestr(CORE, '<coreProperties xmlns="http://schemas.openxmlformats.org/package/2006/metadata/'
                               'core-properties"/>')
    assert doc_properties.mend(bare, given) == 0  # an empty root: nothing goes in
    undeclared = tmp_path / "undeclared.xlsx"
    with zipfile.ZipFile(undeclared, "w") as package:
        package.writestr(CORE, '<coreProperties xmlns="http://schemas.openxmlformats.org/package/2006/metadata/'
                               'core-properties"><revision>1</revision></coreProperties>')
    assert doc_properties.mend(undeclared, {"title": "T", "keywords": "k"}) == 2
    with zipfile.ZipFile(undeclared) as package:
        assert package.read(CORE).decode().startswith(
            '<coreProperties xmlns="http://schemas.openxmlformats.org/package/2006/metadata/core-properties">'
            '<p:title xmlns:p="http://purl.org/dc/elements/1.1/">T</p:title><keywords>k</keywords>')

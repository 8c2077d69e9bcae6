"""The custom XML parts of a legacy file's data store (MsoDataStore), which LibreOffice drops: the result holds each
as Office writes one into a package, and a part that is no XML stays out."""

import zipfile

import olefile
import pytest
from conftest import _soffice_save as soffice

from docshift.engine import cfb, convert
from docshift.engine.inventory import data_store, of_source

SOURCES = (b'<b:Sources SelectedStyle="\\APA.XSL" StyleName="APA" '
           b'xmlns:b="http://schemas.openxmlformats.org/officeDocument/2006/bibliography"><b:Source><b:Tag>Knu84</b:Tag>'
           b"<b:Title>The TeXbook</b:Title></b:Source></b:Sources>")
PROPERTIES = (b'<?xml version="1.0" encoding="UTF-8" standalone="no"?>\r\n<ds:datastoreItem '
              b'ds:itemID="{62E62791-F20E-47ED-9522-D2ACB4D45907}" '
              b'xmlns:ds="http://schemas.openxmlformats.org/officeDocument/2006/customXml"><ds:schemaRefs>'
              b'<ds:schemaRef ds:uri="http://schemas.openxmlformats.org/officeDocument/2006/bibliography"/>'
              b"</ds:schemaRefs></ds:datastoreItem>")
FORMS = b'<?mso-contentType?><FormTemplates xmlns="http://schemas.microsoft.com/sharepoint/v3/contenttype/forms"/>'
MAIN_RELATIONSHIPS = {"doc": "word/_rels/document.xml.rels", "xls": "xl/_rels/workbook.xml.rels",
                      "ppt": "ppt/_rels/presentation.xml.rels"}


def with_data_store(source, target, items):
    """``source``'s compound file again with a data store of ``items`` ({storage name: {stream name: bytes}})."""
    with olefile.OleFileIO(str(source)) as ole:
        root = cfb.read_storage(ole, "", 64 << 20)
    root.children.append(cfb.Entry("MsoDataStore", children=[
        cfb.Entry(name, children=[cfb.Entry(stream, data=data) for stream, data in streams.items()])
        for name, streams in items.items()]))
    target.write_bytes(cfb.write(root))
    return target


@pytest.mark.parametrize("kind", ["doc", "xls", "ppt"])
def test_the_data_store_s_parts_go_into_the_package(office, legacy, kind, tmp_path):
    """A plain soffice writes no custom XML; docshift's result holds the bibliography sources and SharePoint's form
    templates as they are, each related from the main part, the sources' properties related from them with their
    content type. A third item, which is no XML, stays out."""
    source = with_data_store(legacy[kind], tmp_path / f"stored.{kind}", {
        "A1==": {"Item": SOURCES, "Properties": PROPERTIES}, "B2==": {"Item": FORMS},
        "C3==": {"Item": b"<unclosed>", "Properties": PROPERTIES}})
    assert of_source(source, kind).data_store == [(SOURCES, PROPERTIES), (FORMS, None)]
    with zipfile.ZipFile(soffice(source, {"doc": "docx", "xls": "xlsx", "ppt": "pptx"}[kind], tmp_path)) as plain:
        assert not [name for name in plain.namelist() if name.lower().startswith("customxml")]
    converted = convert.convert(office, source, kind, tmp_path / "work", 60)
    with zipfile.ZipFile(converted.path) as package:
        parts = {name: package.read(name) for name in package.namelist() if name.startswith("customXml/")}
        main = package.read(MAIN_RELATIONSHIPS[kind]).decode()
        types = package.read("[Content_Types].xml").decode()
    assert parts.pop("customXml/item1.xml") == SOURCES
    assert parts.pop("customXml/itemProps1.xml") == PROPERTIES
    assert parts.pop("customXml/item2.xml") == FORMS
    assert 'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/customXmlProps" ' \
           'Target="itemProps1.xml"' in parts.pop("customXml/_rels/item1.xml.rels").decode()
    assert parts == {}
    assert main.count("relationships/customXml\"") == 2 and 'Target="../customXml/item2.xml"' in main
    assert '<Override PartName="/customXml/itemProps1.xml" ContentType="application/vnd.openxmlformats-' \
           'officedocument.customXmlProperties+xml"/>' in types
    assert converted.fidelity["complete"] is True


def test_a_file_without_a_data_store_reads_none(legacy):
    """LibreOffice's own .doc has no data store: nothing is read, and the reader of a damaged directory says so."""
    assert of_source(legacy["doc"], "doc").data_store == []

    class Broken:
        def listdir(self, **_):
            raise OSError("a damaged directory")

    assert data_store.read(Broken()) == []

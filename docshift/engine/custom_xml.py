"""The custom XML parts of a legacy file's data store, which LibreOffice drops, put into the OOXML result.

A .doc, .xls or .ppt that Office 2007 or later saved keeps its custom XML parts in its data store
(``inventory/data_store.py``): a document's bibliography sources, a SharePoint library's content type and the values
of its columns, the data of content controls and add-ins. LibreOffice's imports read no data store and its exports
write none, as a plain ``soffice`` shows: a document's sources list comes out empty, and one put back into its
SharePoint library loses its columns' values. Of 1,028 legacy files of the corpus, POI's tests and unseen sets 25-30,
14 have such parts (20 parts).

``mend`` writes each as Office writes it into a package (ECMA-376 Part 1, 15.2.4 and 15.2.5): the part as
``customXml/itemN.xml``, related from the main part (``customXml``), its properties as ``customXml/itemPropsN.xml``,
related from the part (``customXmlProps``) with their content type. A result that has custom XML parts of its own
is left as it is. Every other part stays byte for byte, but for the main part's relationships and the content types.
"""

import posixpath
import zipfile
from pathlib import Path
from typing import Any
from xml.dom import minidom

from docshift.engine import ooxml
from docshift.engine.embedding import CT_NS, content_types, free_name, guarded, read_part, relate
from docshift.engine.inventory.package import Package, relationships_part

CUSTOM_XML, CUSTOM_XML_PROPS = f"{ooxml.RELATIONSHIPS}/customXml", f"{ooxml.RELATIONSHIPS}/customXmlProps"
OFFICE_DOCUMENT = f"{ooxml.RELATIONSHIPS}/officeDocument"
PROPERTIES_TYPE = "application/vnd.openxmlformats-officedocument.customXmlProperties+xml"
XML_TYPE = "application/xml"
EMPTY_RELATIONSHIPS = f'<Relationships xmlns="{ooxml.PACKAGE_RELATIONSHIPS}"/>'


def mend(result: Path, source: Path, items: list[tuple[bytes, bytes | None]]) -> int:
    """Put the custom XML ``items`` of the legacy file ``source`` (each its XML and its properties' XML or None)
    into ``result``. Returns how many went in (0: the file is untouched). Never raises for what the files hold."""
    if not items:
        return 0
    return guarded(lambda result, _: _mend(result, items), result, source,
                   "the custom XML parts of %s stay out of the result: %r")


def _mend(result: Path, items: list[tuple[bytes, bytes | None]]) -> int:
    with zipfile.ZipFile(result) as zf:
        package = Package(zf)
        lower = {name.lower() for name in package.names}
        if any(name.startswith("customxml/") for name in lower):
            return 0
        main = package.related("", OFFICE_DOCUMENT)
        if main is None:
            return 0
        rels_name = relationships_part(main)
        rels = read_part(package, rels_name) if rels_name in package.names else minidom.parseString(
            EMPTY_RELATIONSHIPS)
        added: dict[str, bytes] = {}
        typed: dict[str, str] = {}
        for item, properties in items:
            name = free_name(lower, "customXml/item{}.xml")
            added[name] = item
            typed[name] = XML_TYPE
            relate(rels, posixpath.relpath(name, posixpath.dirname(main)), CUSTOM_XML)
            if properties is not None:
                props_name = name.replace("/item", "/itemProps")
                lower.add(props_name.lower())
                added[props_name] = properties
                typed[props_name] = PROPERTIES_TYPE
                own = minidom.parseString(EMPTY_RELATIONSHIPS)
                relate(own, posixpath.basename(props_name), CUSTOM_XML_PROPS)
                added[relationships_part(name)] = ooxml.serialize(own)
        types = read_part(package, "[Content_Types].xml")
        listed = _defaults(types)
        edits = {"[Content_Types].xml": content_types(
            types, {name: data for name, data in added.items() if typed.get(name) and not (
                typed[name] == XML_TYPE and listed.get("xml") == XML_TYPE)}, set(), lambda name: typed[name])}
        (edits if rels_name in package.names else added)[rels_name] = ooxml.serialize(rels)
        ooxml.rewrite(zf, result, edits, added)
    return len(items)


def _defaults(types: minidom.Document) -> dict[str, str]:
    """{extension: content type} of the Default elements of a [Content_Types].xml."""
    root: Any = types.documentElement
    return {element.getAttribute("Extension").lower(): element.getAttribute("ContentType")
            for element in root.getElementsByTagNameNS(CT_NS, "Default")}

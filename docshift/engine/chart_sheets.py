"""Chart sheets, which LibreOffice's export writes as worksheets holding their chart, written as chart sheets.

A sheet of an .xls whose BOUNDSHEET record says it is a chart (dt 2) is one chart and no cells: in Excel, a tab that
shows the chart alone. LibreOffice has no chart sheets. Its import makes the sheet a worksheet with the chart on it,
and its export writes that: in Excel a grid of empty cells with the chart floating over them, the sheet counted
among the worksheets by every program that lists them (openpyxl's ``chartsheets`` is empty). A plain ``soffice``
does the same. 11 workbooks of the corpus, POI's tests and unseen sets 25-28 have chart sheets (42 sheets).

``mend`` writes each such sheet as Excel writes a chart sheet (ECMA-376 18.3.1.12, CT_Chartsheet): a ``chartsheet``
part holding what the worksheet's part says of the sheet that a chart sheet has (its code name and tab colour, its
view's selection and zoom, its protection, margins, the page setup a chart sheet has, header and footer) and its
drawing, whose anchors become absolute (the place and size LibreOffice wrote in each shape's ``xfrm``: a chart sheet
has no cells to anchor to); the workbook's relationship to it and its content type are a chart sheet's. A sheet
whose worksheet holds anything else (a cell, a merged range, a comment, a control) stays as LibreOffice wrote it.
"""

import posixpath
import zipfile
from pathlib import Path
from typing import Any
from xml.dom import minidom

from docshift.engine import ooxml
from docshift.engine.embedding import CT_NS, ERRORS, content_types, free_name, log, part_bytes, read_part
from docshift.engine.inventory.package import NS_PR, NS_R, NS_S, SEP, Package, relationships_part
from docshift.engine.sheet_objects import worksheets

DRAWING = "http://schemas.openxmlformats.org/drawingml/2006/spreadsheetDrawing"
MAIN = "http://schemas.openxmlformats.org/drawingml/2006/main"
CHARTSHEET_TYPE = f"{NS_R}/chartsheet"
CHARTSHEET_CONTENT = "application/vnd.openxmlformats-officedocument.spreadsheetml.chartsheet+xml"
RELATIONSHIPS_CONTENT = "application/vnd.openxmlformats-package.relationships+xml"
WORKBOOK, WORKBOOK_RELS = "xl/workbook.xml", "xl/_rels/workbook.xml.rels"
MAX_SHEET = 64 << 10  # a worksheet that holds a chart alone is a few KB
# what LibreOffice writes in a worksheet that holds a chart alone; a sheet whose part has anything else stays
ALONE = {"sheetPr", "dimension", "sheetViews", "sheetFormatPr", "cols", "sheetData", "sheetProtection",
         "printOptions", "pageMargins", "pageSetup", "headerFooter", "drawing", "legacyDrawingHF", "extLst"}
# what a chart sheet's elements have of a worksheet's (CT_ChartsheetPr, CT_ChartsheetView, CT_CsPageSetup)
SHEET_PR = {"published", "codeName"}
VIEW = {"tabSelected", "zoomScale", "workbookViewId", "zoomToFit"}
PAGE_SETUP = {"paperSize", "paperHeight", "paperWidth", "firstPageNumber", "orientation", "usePrinterDefaults",
              "blackAndWhite", "draft", "useFirstPageNumber", "horizontalDpi", "verticalDpi", "copies", "r:id"}
COPIED = ("pageMargins", "headerFooter", "drawing", "legacyDrawingHF")  # the same in both, in a chart sheet's order
ANCHORS = {"twoCellAnchor", "oneCellAnchor"}
# where a shape of each kind keeps its place and size: the element holding its a:xfrm
FRAMES = {"graphicFrame": None, "sp": "spPr", "pic": "spPr", "cxnSp": "spPr", "grpSp": "grpSpPr"}


def mend(result: Path, kind: str, sheets: list[str]) -> int:
    """Write each sheet of the .xlsx ``result`` that the .xls names a chart sheet (``sheets``) as one. Returns how
    many sheets (0: the file is untouched). Never raises for what the file holds."""
    if kind != "xls" or not sheets:
        return 0
    try:
        return _mend(result, set(sheets))
    except ERRORS as error:
        log.warning("the chart sheets of %s stay worksheets: %r", result, error)
        return 0


def _mend(result: Path, wanted: set[str]) -> int:
    with zipfile.ZipFile(result) as zf:
        package = Package(zf)
        lower = {name.lower() for name in package.names}
        parts = {target: rid for rid, (rel_type, target) in package.relationships(WORKBOOK, required=True).items()
                 if rel_type == f"{NS_R}/worksheet" and target and rid is not None}
        edits: dict[str, bytes] = {}
        added: dict[str, bytes] = {}
        dropped: set[str] = set()
        moved: dict[str, str] = {}  # {relationship id: the chart sheet's part}
        types = read_part(package, "[Content_Types].xml")
        listed = {element.getAttribute("PartName").lstrip("/") for element in types.getElementsByTagNameNS(
            CT_NS, "Override")}
        typed: list[str] = []  # a chart sheet's part, and its relationships' where LibreOffice listed the worksheet's
        for _, name, part in worksheets(package):
            if name not in wanted or part not in parts or package.names[part].file_size > MAX_SHEET:
                continue
            drawings = [target for rel_type, target in package.relationships(part).values()
                        if rel_type == f"{NS_R}/drawing" and target in package.names]
            chartsheet = _chartsheet(part_bytes(package, part), part)
            absolute = _absolute(read_part(package, drawings[0])) if len(drawings) == 1 else None
            if chartsheet is None or absolute is None:
                continue
            new = free_name(lower, "xl/chartsheets/sheet{}.xml")
            added[new], edits[drawings[0]] = chartsheet, absolute
            dropped |= {part, relationships_part(part)}
            added[relationships_part(new)] = part_bytes(package, relationships_part(part))  # its targets: ../x/y
            moved[parts[part]] = new
            typed += [new, relationships_part(new)] if relationships_part(part) in listed else [new]
        if not moved:
            return 0
        edits[WORKBOOK_RELS] = ooxml.edit_tags(part_bytes(package, WORKBOOK_RELS), WORKBOOK_RELS, lambda tag, attrs: {
            "Type": CHARTSHEET_TYPE, "Target": _target(attrs.get("Target", ""), moved[attrs["Id"]])}
            if tag == f"{NS_PR}{SEP}Relationship" and attrs.get("Id") in moved else None)
        edits["[Content_Types].xml"] = content_types(types, dict.fromkeys(typed, b""), dropped, lambda name: (
            RELATIONSHIPS_CONTENT if name.endswith(".rels") else CHARTSHEET_CONTENT))
        ooxml.rewrite(zf, result, edits, added, dropped)
    return len(moved)


def _target(written: str, part: str) -> str:
    """The relationship's target of ``part`` as the workbook's relationships write their targets: from the
    package's root (``/xl/...``) or beside the workbook (``worksheets/...``)."""
    return "/" + part if written.startswith("/") else posixpath.relpath(part, "xl")


def _chartsheet(data: bytes, name: str) -> bytes | None:
    """The chart sheet of what the worksheet part ``name`` (``data``) says of its sheet; None where it holds what a
    chart sheet has no room for (a cell, a merged range, a comment's drawing) or is not as LibreOffice writes it."""
    root: Any = minidom.parseString(ooxml.checked(data, name)).documentElement
    children = [node for node in root.childNodes if node.nodeType == node.ELEMENT_NODE]
    if root.prefix or root.namespaceURI != NS_S or any(
            node.namespaceURI != NS_S or node.localName not in ALONE for node in children):
        return None
    found = {node.localName: node for node in children}
    if "drawing" not in found or "sheetData" not in found or any(
            node.nodeType == node.ELEMENT_NODE for node in found["sheetData"].childNodes):
        return None
    out = [f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<chartsheet xmlns="{NS_S}" '
           f'xmlns:r="{NS_R}">']
    if "sheetPr" in found:
        colours = "".join(node.toxml() for node in found["sheetPr"].childNodes
                          if node.nodeType == node.ELEMENT_NODE and node.localName == "tabColor")
        out.append(f"<sheetPr{_attributes(found['sheetPr'], SHEET_PR)}>{colours}</sheetPr>")
    views = [node for node in found["sheetViews"].childNodes if node.nodeType == node.ELEMENT_NODE] \
        if "sheetViews" in found else []
    out.append("<sheetViews>" + ("".join(f"<sheetView{_attributes(view, VIEW, {'workbookViewId': '0'})}/>"
                                         for view in views) or '<sheetView workbookViewId="0"/>') + "</sheetViews>")
    protection = found.get("sheetProtection")
    if protection is not None and protection.getAttribute("sheet") in ("1", "true"):  # the chart's content locked
        locked = {"content": "1"} | ({"objects": "1"} if protection.getAttribute("objects") in ("1", "true") else {})
        out.append(f"<sheetProtection{_attributes(protection, {'password'}, locked)}/>")
    for local in COPIED:
        if local in found:
            out.append(found[local].toxml())
        if local == "pageMargins" and "pageSetup" in found:
            out.append(f"<pageSetup{_attributes(found['pageSetup'], PAGE_SETUP)}/>")
    return ("".join(out) + "</chartsheet>").encode()


def _attributes(element: Any, kept: set[str], defaults: dict[str, str] | None = None) -> str:
    """The attributes of ``element`` that ``kept`` names (with ``defaults`` where it has none), as a tag writes
    them."""
    given = {**(defaults or {}), **{name: value for name, value in element.attributes.items() if name in kept}}
    return "".join(f' {name}="{ooxml.attribute_value(value)}"' for name, value in given.items())


def _absolute(doc: Any) -> bytes | None:
    """The drawing ``doc`` with each cell anchor an absolute one, at the place and size of its shape's ``xfrm``;
    None where a shape has none."""
    root = doc.documentElement
    for anchor in [node for node in root.childNodes if node.nodeType == node.ELEMENT_NODE]:
        if anchor.namespaceURI != DRAWING or anchor.localName not in ANCHORS:
            continue
        shapes = [node for node in anchor.childNodes if node.nodeType == node.ELEMENT_NODE and
                  node.namespaceURI == DRAWING and node.localName in FRAMES]
        if len(shapes) != 1:
            return None
        shape = shapes[0]
        holder = _child(shape, DRAWING, FRAMES[shape.localName]) if FRAMES[shape.localName] else shape
        frame = _child(holder, DRAWING if holder is shape else MAIN, "xfrm") if holder is not None else None
        place, size = (_child(frame, MAIN, "off"), _child(frame, MAIN, "ext")) if frame is not None else (None, None)
        if place is None or size is None:
            return None
        prefix = f"{anchor.prefix}:" if anchor.prefix else ""
        made = doc.createElementNS(DRAWING, f"{prefix}absoluteAnchor")
        for local, source, names in (("pos", place, ("x", "y")), ("ext", size, ("cx", "cy"))):
            child = made.appendChild(doc.createElementNS(DRAWING, f"{prefix}{local}"))
            for name in names:
                child.setAttribute(name, source.getAttribute(name) or "0")
        made.appendChild(shape)
        client = _child(anchor, DRAWING, "clientData")
        made.appendChild(client if client is not None else doc.createElementNS(DRAWING, f"{prefix}clientData"))
        root.replaceChild(made, anchor)
    return ooxml.serialize(doc)


def _child(element: Any, namespace: str, local: str | None) -> Any:
    """The first child element of ``element`` in ``namespace`` named ``local``, or None."""
    return next((node for node in element.childNodes if node.nodeType == node.ELEMENT_NODE and
                 node.namespaceURI == namespace and node.localName == local), None)

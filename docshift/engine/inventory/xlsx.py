"""The counts of an .xlsx/.xlsm, the result of an .xls.

Its sheets and shared strings are read a megabyte at a time by a regular expression over LibreOffice's own
layout (its matches checked against the part's count of ``</c>``, the part checked to end with its root); expat
reads any other layout.
"""

import html
import re
from typing import Any

from docshift.engine import ooxml
from docshift.engine.inventory import sheet_controls
from docshift.engine.inventory.common import (
    CHUNK,
    ErrorValue,
    Inventory,
    Unreadable,
    attempt,
    column_number,
    header_shows,
    place,
)
from docshift.engine.inventory.package import NS_R, NS_S, SEP, Package, charts_and_objects, pictures_in

# a sheet's cells {b"B1": value}, the refs of those with a formula, its non-empty odd headers and footers,
# whether it may hold controls (it says "<control"), and how many hyperlinks its cells have
Sheet = tuple[dict[bytes, Any], set[bytes], list[str], bool, int]

# a cell as LibreOffice writes it: <c r="B1" s="3" t="n"><f ...>formula</f><v>value</v></c>, or an inline string
SHEET_CELL = re.compile(rb'<c r="([A-Z]{1,3}[0-9]{1,7})"(?: s="[0-9]+")?(?: t="([a-zA-Z]+)")?>'
                        rb'(<f[^>]*/>|<f[^>]*>[^<]*</f>)?(?:<v>([^<]*)</v>|<v/>|<is>(.*?)</is>)?</c>', re.S)
INLINE_TEXT = re.compile(rb"<t(?:\s[^>]*)?>([^<]*)</t>")
PHONETIC = re.compile(rb"<rPh\b.*?</rPh>", re.S)
SHARED_STRING = re.compile(rb"<si>(.*?)</si>|<si/>", re.S)
HEADER_FOOTER = re.compile(rb"<odd(Header|Footer)>([^<]*)</odd(?:Header|Footer)>")
ARRAY_RANGE = re.compile(rb'\bt="(?:array|dataTable)"[^>]*\bref="([A-Z]{1,3})([0-9]{1,7}):([A-Z]{1,3})([0-9]{1,7})"')
CELL_REF = re.compile(rb"([A-Z]{1,3})([0-9]{1,7})")
ARRAY_LOOKS = 1_000_000  # cells looked at for the ranges of a sheet's array formulas and data tables, at most
DEFAULT_NAMESPACE = re.compile(rb"<(worksheet|sst)\s[^>]*xmlns=\"" + re.escape(NS_S.encode()) + rb"\"")
CONTROL = b"<control"
HYPERLINK = re.compile(rb"<hyperlink\b")
DRAWN = re.compile(rb"<xdr:(?:sp|cxnSp|grpSp)[\s>]")
SHAPE = re.compile(rb"<xdr:sp[\s>].*?</xdr:sp>", re.S)
NO_SIZE = b'<a:ext cx="0" cy="0"/>'
MACRO_SHEETS = ("/xlMacrosheet", "/xlIntlMacrosheet")  # the relationship types of Excel 4.0 macro sheets


def read(package: Package, inventory: Inventory) -> None:
    """Counts of an .xlsx/.xlsm: the workbook, shared strings, sheets, their drawings and comments."""
    counts = inventory.counts
    charts_objects = attempt(charts_and_objects, package, "xl")
    if charts_objects:
        counts["charts"], counts["embedded_objects"] = charts_objects
    main = "xl/workbook.xml"
    sheets: list[tuple[str, str | None]] = []
    flags: dict[str, bool] = {}

    def start(tag: str, attributes: dict[str, str]) -> None:
        if tag == f"{NS_S}{SEP}sheet":
            sheets.append((ooxml.xstring(attributes.get("name", "")), attributes.get(f"{NS_R}{SEP}id")))
        elif tag == f"{NS_S}{SEP}workbookPr":
            flags["date1904"] = attributes.get("date1904", "false").lower() in ("1", "true")

    package.parse(main, start)
    inventory.date1904 = flags.get("date1904", False)
    inventory.sheets = [name for name, _ in sheets]
    counts["sheets"] = len(sheets)
    relationships = package.relationships(main)
    inventory.where["macro_sheets"] = [f"sheet '{name}'" for name, rid in sheets
                                       if relationships.get(rid, ("", None))[0].endswith(MACRO_SHEETS)]
    counts["macro_sheets"] = len(inventory.where["macro_sheets"])
    links = attempt(dde_items, package, relationships)
    if links is not None:
        inventory.where["dde_links"], counts["dde_links"] = links, len(links)
    strings = attempt(shared_strings, package, relationships)
    cells: dict[str, dict[bytes, Any]] = {}
    pictures: set[str] = set()
    headers_at: list[str] = []
    comments_at: list[str] = []
    controls_at: list[str] = []
    actions_at: list[str] = []  # shapes that run a macro
    links_at: list[str] = []  # the hyperlinks of cells
    shapes_at: list[str] = []  # the drawing shapes
    readable = strings is not None
    for name, rid in sheets:
        target = relationships.get(rid, ("", None))[1]
        if not target or target not in package.names:
            continue
        try:
            found, formulas, headers, controlled, links = sheet_of(package, target, strings or [])
        except Exception:
            readable = False
            continue
        cells[name], inventory.formulas[name] = found, formulas
        headers_at += [place(name, which) for which in headers]
        links_at += [f"sheet '{name}'"] * links
        sheet_relationships = package.relationships(target).values()
        vml = [part for rel_type, part in sheet_relationships
               if part and part in package.names and rel_type.endswith("/vmlDrawing")]
        if controlled or vml:
            controls_at += [f"sheet '{name}'"] * sheet_controls.in_result(package, target, vml, controlled)
        drawings = [part for rel_type, part in sheet_relationships
                    if part and part in package.names and rel_type.endswith("/drawing")]
        actions_at += [f"sheet '{name}'"] * sheet_controls.macros_on_shapes(package, drawings)
        shapes_at += [f"sheet '{name}'"] * sum(drawn_shapes(b"".join(package.chunks(part))) for part in drawings)
        for rel_type, part in sheet_relationships:
            if part and part in package.names and rel_type.endswith("/drawing"):
                pictures |= pictures_in(package, part)
            elif part and part in package.names and rel_type.endswith("/comments"):
                comments_at += [place(name, ref) for ref in _comment_refs(package, part)]
    counts["images"] = len(pictures)
    counts["comments"] = len(comments_at)
    inventory.where["comments"] = comments_at
    counts["controls"], inventory.where["controls"] = len(controls_at), controls_at
    counts["actions"], inventory.where["actions"] = len(actions_at), actions_at
    counts["shapes"], inventory.where["shapes"] = len(shapes_at), shapes_at
    if readable:
        counts["hyperlinks"], inventory.where["hyperlinks"] = len(links_at), links_at
    if readable:  # a sheet that could not be read leaves its cells and headers unknown
        inventory.cells = cells
        counts["cells"] = sum(len(found) for found in cells.values())
        counts["headers_footers"] = len(headers_at)
        inventory.where["headers_footers"] = headers_at


def _comment_refs(package: Package, name: str) -> list[str]:
    """The cell references of the comments in a comments part."""
    refs = []

    def start(tag: str, attributes: dict[str, str]) -> None:
        if tag == f"{NS_S}{SEP}comment":
            refs.append(attributes.get("ref", "?"))

    package.parse(name, start)
    return refs


def _unescape(raw: bytes) -> str:
    """The text of XML character data: entities and the _xHHHH_ escapes of OOXML resolved."""
    text = raw.decode("utf-8", "replace")
    if "&" in text:
        text = html.unescape(text)
    return ooxml.xstring(text)


def dde_items(package: Package, relationships: dict[str | None, tuple[str, str | None]]) -> list[str]:
    """``service|topic!item`` of each item of the workbook's DDE links (but a link's ``StdDocumentName``), in the
    order of its external link parts."""
    found: list[str] = []
    link = [""]  # the link's "service|topic!" that the items read now belong to

    def start(tag: str, attributes: dict[str, str]) -> None:
        if tag == f"{NS_S}{SEP}ddeLink":
            link[0] = f"{attributes.get('ddeService', '')}|{attributes.get('ddeTopic', '')}!"
        elif tag == f"{NS_S}{SEP}ddeItem" and attributes.get("ole", "0") not in ("1", "true"):
            found.append(link[0] + attributes.get("name", ""))

    for kind, part in relationships.values():
        if kind.endswith("/externalLink") and part and part in package.names and package.holds(part, b"ddeLink"):
            package.parse(part, start)
    return found


def shared_strings(package: Package, relationships: dict[str | None, tuple[str, str | None]]) -> list[str]:
    """The shared strings of the workbook, in order (rich text runs joined, phonetic runs left out)."""
    names = [target for rel_type, target in relationships.values()
             if target and rel_type.endswith("/sharedStrings") and target in package.names]
    if not names:
        return []
    strings = []
    head: bytes | None = None
    tail = b""
    for chunk in package.chunks(names[0]):
        data = tail + chunk
        if head is None:
            head = data[:4096]
            if not DEFAULT_NAMESPACE.search(head):
                return _shared_strings_expat(package, names[0])
        last = max(data.rfind(b"</si>") + 5, data.rfind(b"<si/>") + 5, 0)
        for match in SHARED_STRING.finditer(data, 0, last):
            strings.append(_string_item(match.group(1) or b""))
        tail = data[last:]
    if not tail.rstrip().endswith(b"</sst>"):
        raise Unreadable(f"{names[0]} ends early")
    return strings


def _string_item(content: bytes) -> str:
    """The text of an ``<si>`` or ``<is>`` element's content."""
    if b"<rPh" in content:
        content = PHONETIC.sub(b"", content)
    return "".join(_unescape(text) for text in INLINE_TEXT.findall(content))


def _shared_strings_expat(package: Package, name: str) -> list[str]:
    """The shared strings read by expat: for a part in another layout than LibreOffice's."""
    strings: list[list[str]] = []
    state = {"in": 0, "phonetic": 0}
    si, t, rph = f"{NS_S}{SEP}si", f"{NS_S}{SEP}t", f"{NS_S}{SEP}rPh"

    def start(tag: str, _: dict[str, str]) -> None:
        if tag == si:
            strings.append([])
        elif tag == t:
            state["in"] += 1
        elif tag == rph:
            state["phonetic"] += 1

    def end(tag: str) -> None:
        if tag == t:
            state["in"] -= 1
        elif tag == rph:
            state["phonetic"] -= 1

    def text(data: str) -> None:
        if state["in"] and not state["phonetic"] and strings:
            strings[-1].append(data)

    package.parse(name, start, end, text)
    return [ooxml.xstring("".join(parts)) for parts in strings]


def cell_value(kind: bytes, raw: bytes, strings: list[str]) -> Any:
    """The value of a result cell from its ``t`` and the text of its ``<v>``, or None when it has none."""
    if kind == b"s":
        index = int(raw)
        return strings[index] if 0 <= index < len(strings) else None
    if kind in (b"str", b"inlineStr"):
        return _unescape(raw)
    if kind == b"b":
        return raw.strip() in (b"1", b"true")
    if kind == b"e":
        return ErrorValue(_unescape(raw))
    if kind == b"d":
        return _unescape(raw)
    return float(raw)


def drawn_shapes(drawing: bytes) -> int:
    """How many drawing shapes (shapes, connectors, groups) a sheet's DrawingML drawing holds, but the shapes of no
    size LibreOffice writes for the form controls it does not keep as controls (``form_controls``)."""
    phantoms = sum(1 for shape in SHAPE.finditer(drawing) if NO_SIZE in shape.group())
    return len(DRAWN.findall(drawing)) - phantoms


def sheet_of(package: Package, name: str, strings: list[str]) -> Sheet:
    """({ref: value}, {refs with a formula}, non-empty odd headers and footers, whether it says "<control") of one
    worksheet part."""
    cells: dict[bytes, Any] = {}
    formulas: set[bytes] = set()
    arrays: list[tuple[bytes, ...]] = []
    head: bytes | None = None
    tail, matched, closed = b"", 0, 0
    controlled, edge = False, b""
    for chunk in package.chunks(name):
        controlled = controlled or CONTROL in edge + chunk[:len(CONTROL)] or CONTROL in chunk
        edge = chunk[-len(CONTROL):]
        data = tail + chunk
        if head is None:
            head = data[:4096]
            if not DEFAULT_NAMESPACE.search(head):
                return _sheet_expat(package, name, strings)
        last = data.rfind(b"</c>")
        if last < 0:
            tail = data if len(data) < CHUNK else data[-(CHUNK // 4):]
            continue
        last += 4
        closed += data.count(b"</c>", 0, last)
        found = SHEET_CELL.findall(data, 0, last)
        matched += len(found)
        for ref, kind, formula, raw, inline in found:
            try:
                if not kind or kind == b"n":
                    if not raw:
                        continue
                    value: Any = float(raw)
                elif kind == b"s":
                    index = int(raw)
                    if index < 0:
                        continue
                    value = strings[index]
                elif kind == b"inlineStr":
                    value = _string_item(inline)
                else:
                    value = cell_value(kind, raw, strings)
            except (ValueError, IndexError):
                continue
            cells[ref] = value
            if formula:
                formulas.add(ref)
                arrays += ARRAY_RANGE.findall(formula)
        tail = data[last:]
    if matched != closed:  # a cell the expression did not take: read the part properly
        return _sheet_expat(package, name, strings)
    if not tail.rstrip().endswith(b"</worksheet>"):
        raise Unreadable(f"{name} ends early")
    headers = [which.decode().lower() for which, text in HEADER_FOOTER.findall(tail)
               if header_shows(html.unescape(text.decode("utf-8", "replace")))]
    return cells, formulas | _array_cells(arrays, cells), headers, controlled, len(HYPERLINK.findall(tail))


def _array_cells(arrays: list[tuple[bytes, ...]], cells: dict[bytes, Any]) -> set[bytes]:
    """The cells of ``cells`` inside the ranges of array formulas and data tables (``(first column, row, last
    column, row)``): each holds a result of that formula, and only the range's first cell has an ``<f>``. Each
    range is looked at cell by cell where it is smaller than the sheet, else the sheet's cells are; ARRAY_LOOKS in
    all."""
    ranges = [(column_number(left), int(top), column_number(right), int(bottom)) for left, top, right, bottom in arrays]
    ranges = [bounds for bounds in ranges if bounds[0] != bounds[2] or bounds[1] != bounds[3]]
    if not ranges:
        return set()
    places: dict[tuple[int, int], bytes] = {}
    for ref in cells:
        match = CELL_REF.fullmatch(ref)
        if match:
            places[column_number(match.group(1)), int(match.group(2))] = ref
    found: set[bytes] = set()
    looks = ARRAY_LOOKS
    for left, top, right, bottom in ranges:
        area = (right - left + 1) * (bottom - top + 1)
        looks -= min(area, len(places))
        if looks < 0:
            break  # the rest stay constants: the report may then call one a value, not a formula result
        if area <= len(places):
            found.update(places[column, row] for column in range(left, right + 1) for row in range(top, bottom + 1)
                         if (column, row) in places)
        else:
            found.update(ref for (column, row), ref in places.items()
                         if left <= column <= right and top <= row <= bottom)
    return found


def _sheet_expat(package: Package, name: str, strings: list[str]) -> Sheet:
    """What ``_sheet`` reads, by expat: for a part in another layout than LibreOffice's."""
    cells: dict[bytes, Any] = {}
    formulas: set[bytes] = set()
    state: dict[str, Any] = {"ref": None, "t": b"n", "v": None, "f": False, "in": None, "inline": [], "headers": [],
                             "hf": None, "arrays": [], "links": 0}
    c, v, f, t, is_ = (f"{NS_S}{SEP}{local}" for local in ("c", "v", "f", "t", "is"))
    hf_tags = {f"{NS_S}{SEP}oddHeader", f"{NS_S}{SEP}oddFooter"}
    link = f"{NS_S}{SEP}hyperlink"

    def start(tag: str, attributes: dict[str, str]) -> None:
        if tag == c:
            state.update(ref=attributes.get("r", "").encode(), t=attributes.get("t", "n").encode(), v=None,
                         f=False, inline=[])
        elif tag == v:
            state["in"], state["v"] = "v", []
        elif tag == f:
            state["f"] = True
            if attributes.get("t") in ("array", "dataTable"):
                state["arrays"] += ARRAY_RANGE.findall(f't="array" ref="{attributes.get("ref", "")}"'.encode())
        elif tag == t and state["ref"] is not None:
            state["in"] = "t"
        elif tag in hf_tags:
            state["hf"] = []
        elif tag == link:
            state["links"] += 1

    def end(tag: str) -> None:
        if tag == c:
            value: Any = None
            try:
                if state["t"] == b"inlineStr":
                    value = "".join(state["inline"])
                elif state["v"] is not None:
                    raw = "".join(state["v"])
                    if state["t"] in (b"str", b"e", b"d"):
                        value = raw if state["t"] != b"e" else ErrorValue(raw)
                    else:
                        value = cell_value(state["t"], raw.encode(), strings)
            except ValueError:
                value = None
            if value is not None and state["ref"]:
                cells[state["ref"]] = value
                if state["f"]:
                    formulas.add(state["ref"])
            state["ref"] = None
        elif tag in (v, t):
            state["in"] = None
        elif tag in hf_tags:
            if header_shows("".join(state["hf"])):
                state["headers"].append(tag.rpartition("odd")[2].lower())
            state["hf"] = None
        elif tag == is_:
            state["in"] = None

    def text(data: str) -> None:
        if state["in"] == "v":
            state["v"].append(data)
        elif state["in"] == "t":
            state["inline"].append(data)
        elif state["hf"] is not None:
            state["hf"].append(data)

    package.parse(name, start, end, text)
    return (cells, formulas | _array_cells(state["arrays"], cells), state["headers"], True,  # in_result looks
            state["links"])

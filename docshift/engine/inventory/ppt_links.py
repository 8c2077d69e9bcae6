"""The hyperlinks of a .ppt, slide by slide (the report's ``hyperlinks``), and how its records hold them.

A hyperlink is an InteractiveInfoAtom whose action is a hyperlink ([MS-PPT] ``InteractiveInfoAtom``, action 4): a
shape's, in its client data (a click's and a mouse-over's), or a text's, in a client text box or in the slide
list's text records of its slide, followed by a TxInteractiveInfoAtom with the range of characters it covers. It
names an ExHyperlink of the document's ExObjList. Where it goes is the target and location of the entry of the
``_PID_HLINKS`` list (the user-defined property set of ``DocumentSummaryInformation``) in the place of that
ExHyperlink in the list, as PowerPoint and LibreOffice pair them, or without such an entry the ExHyperlink's own
target and location strings.

Counted on each live slide: the distinct places its hyperlinks go to. Not counted: a link that goes nowhere (no
target, no location), one to the next, previous, first or last slide or to a custom show (a jump or a show, which
OOXML writes as an action, not as a hyperlink), and a text's link over characters that show nothing (LibreOffice
keeps no link on a paragraph mark).
"""

import struct
from collections.abc import Iterator

import olefile

from docshift.engine.inventory import officeart, ppt
from docshift.engine.inventory.common import Budget, Inventory, stream

SUMMARY = "\x05DocumentSummaryInformation"
HEADER, SET_ENTRY = 28, 20  # a property set stream's header; the FMTID and offset of each set
MOST_SETS = 2  # LibreOffice reads none of a stream that says it holds more
USER_DEFINED = bytes.fromhex("05d5cdd59c2e1b10939708002b2cf9ae")  # FMTID_UserDefinedProperties
VT_I4, VT_LPWSTR, VT_BLOB = 0x03, 0x1F, 0x41
ENTRY_NUMBERS = 4  # an entry: dwHash, dwApp, dwOfficeArt, dwInfo (VT_I4 each), then its target and location
MOST_ENTRIES = 1 << 16
RT_EXOBJ_LIST, RT_EXHYPERLINK, RT_EXHYPERLINK_ATOM = 0x0409, 0x0FD7, 0x0FD3
RT_INTERACTIVE_INFO, RT_INTERACTIVE_INFO_ATOM, RT_TX_INTERACTIVE_INFO = 0x0FF2, 0x0FF3, 0x0FDF
RT_CLIENT_DATA, RT_CLIENT_TEXTBOX = 0xF011, 0xF00D
RT_TEXT_HEADER, RT_TEXT_CHARS, RT_TEXT_BYTES = 0x0F9F, 0x0FA0, 0x0FA8
ACTION_HYPERLINK = 4
JUMPS = {0, 1, 2, 3, 6}  # hyperlinkType (LinkToEnum): next, previous, first, last slide; a custom show


def hyperlink_list(data: bytes | None, limit: int | None = None) -> list[tuple[str, str]] | None:
    """(target, location) of each whole entry of the ``_PID_HLINKS`` list of the summary stream ``data``, read as
    far as ``limit`` bytes of its property (all of it by default); None where it has none."""
    found = hyperlink_property(data)
    if data is None or found is None:
        return None
    start = found[1]
    return entries(data[start:start + (len(data) if limit is None else max(0, limit))])


def hyperlink_property(data: bytes | None) -> tuple[int, int] | None:
    """(offset of its set, offset of the property) of the hyperlink list of the summary stream ``data``: the first
    property of the user-defined set that holds one."""
    data = data or b""
    for fmtid, offset in property_sets(data, MOST_SETS) or []:
        if fmtid != USER_DEFINED:
            continue
        for start in property_starts(data, offset):
            if start + 12 <= len(data) and struct.unpack_from("<I", data, start)[0] == VT_BLOB and \
                    entries(data[start:]) is not None:
                return offset, start
    return None


def property_sets(data: bytes, most: int) -> list[tuple[bytes, int]] | None:
    """(FMTID, offset) of each property set the stream ``data`` lists; None where it lists none, or more than
    ``most``, or its list runs past its end (LibreOffice reads none of a stream of more than two)."""
    if len(data) < HEADER or data[:2] != b"\xfe\xff":
        return None
    count = struct.unpack_from("<I", data, HEADER - 4)[0]
    if not 0 < count <= most or HEADER + SET_ENTRY * count > len(data):
        return None
    return [(data[at:at + 16], struct.unpack_from("<I", data, at + 16)[0])
            for at in range(HEADER, HEADER + SET_ENTRY * count, SET_ENTRY)]


def property_starts(data: bytes, offset: int) -> list[int]:
    """The offsets in ``data`` of the properties of the set at ``offset``."""
    if offset + 8 > len(data):
        return []
    count = min(struct.unpack_from("<I", data, offset + 4)[0], (len(data) - offset - 8) // 8)
    return [offset + struct.unpack_from("<I", data, offset + 12 + 8 * number)[0] for number in range(count)]


def entries(value: bytes) -> list[tuple[str, str]] | None:
    """The whole entries of the VT_BLOB ``value`` (its type, size, then a vector of typed values), as far as it
    goes; None where it holds no hyperlink list."""
    if len(value) < 12:
        return None
    values, at = struct.unpack_from("<I", value, 8)[0], 12
    if values % 6 or values > 6 * MOST_ENTRIES:
        return None
    entries: list[tuple[str, str]] = []
    for _ in range(values // 6):
        for _ in range(ENTRY_NUMBERS):
            if at + 8 > len(value) or struct.unpack_from("<I", value, at)[0] != VT_I4:
                return entries
            at += 8
        strings = []
        for _ in range(2):
            if at + 8 > len(value) or struct.unpack_from("<I", value, at)[0] != VT_LPWSTR:
                return entries
            length = struct.unpack_from("<I", value, at + 4)[0]
            end = at + 8 + 2 * length
            if end > len(value):
                return entries
            strings.append(value[at + 8:end].decode("utf_16_le", "replace").rstrip("\0"))
            at = end + (2 if length & 1 else 0)  # each string aligned to 4 bytes
        entries.append((strings[0], strings[1]))
    return entries


def exhyperlinks(doc: bytes, show: ppt._Presentation, budget: Budget) -> list[tuple[int, str, str]]:
    """(id, target, location) of each ExHyperlink of the document's ExObjList, in order: its atom's id and its
    CStrings of instance 1 and 3 (the first, instance 0, is the text it was made of)."""
    links: list[tuple[int, str, str]] = []
    for rec_type, _, _, body, stop in officeart.children(doc, *show.document, budget):
        if rec_type != RT_EXOBJ_LIST:
            continue
        for child, _, _, child_body, child_stop in officeart.children(doc, body, stop, budget):
            if child != RT_EXHYPERLINK:
                continue
            number, strings = None, {}
            for kind, instance, _, atom, end in officeart.children(doc, child_body, child_stop, budget):
                if kind == RT_EXHYPERLINK_ATOM and end - atom >= 4:
                    number = struct.unpack_from("<I", doc, atom)[0]
                elif kind == ppt.RT_CSTRING:
                    strings[instance] = bytes(doc[atom:end]).decode("utf_16_le", "replace").rstrip("\0")
            if number is not None:
                links.append((number, strings.get(1, ""), strings.get(3, "")))
    return links


def slide_text_records(doc: bytes, show: ppt._Presentation, budget: Budget) -> dict[int, tuple[int, int]]:
    """{slide number (from 0): (start, end)} of the records the slide list holds for each slide's text."""
    found: dict[int, tuple[int, int]] = {}
    for rec_type, instance, _, body, stop in officeart.children(doc, *show.document, budget):
        if rec_type == ppt.RT_SLIDE_LIST and instance == 0:
            slide = -1
            for child, _, _, child_body, child_stop in officeart.children(doc, body, stop, budget):
                if child == ppt.RT_SLIDE_PERSIST:
                    slide += 1
                elif slide >= 0:
                    found[slide] = (found.get(slide, (child_body - 8,))[0], child_stop)
    return found


def text_links(doc: bytes, start: int, end: int, budget: Budget) -> Iterator[tuple[int, int, int, bool]]:
    """(offset of the InteractiveInfoAtom, its ExHyperlink id, its hyperlinkType, whether its range shows a
    character) of each hyperlink of the text records in ``doc[start:end]`` (one level: the slide list's, a client
    text box's)."""
    text, pending = "", None
    for rec_type, _, _, body, stop in officeart.children(doc, start, end, budget):
        if rec_type == RT_TEXT_HEADER:
            text, pending = "", None
        elif rec_type == RT_TEXT_CHARS:
            text = bytes(doc[body:stop]).decode("utf_16_le", "replace")
        elif rec_type == RT_TEXT_BYTES:
            text = bytes(doc[body:stop]).decode("latin-1")
        elif rec_type == RT_INTERACTIVE_INFO:
            pending = _atom(doc, body, stop, budget)
        elif rec_type == RT_TX_INTERACTIVE_INFO and pending is not None and stop - body >= 8:
            begin, finish = struct.unpack_from("<ii", doc, body)
            at, number, kind = pending
            yield at, number, kind, bool(text[max(0, begin):max(0, finish)].strip())
            pending = None


def shape_links(doc: bytes, start: int, end: int, budget: Budget) -> Iterator[tuple[int, int, int]]:
    """(offset of the InteractiveInfoAtom, its ExHyperlink id, its hyperlinkType) of each hyperlink of a shape (a
    click's or a mouse-over's, in its client data) of the drawing records in ``doc[start:end]``."""
    for rec_type, _, _, body, stop, _ in officeart.walk(doc, start, end, budget, skip=(RT_CLIENT_TEXTBOX,)):
        if rec_type == RT_CLIENT_DATA:
            for child, _, _, child_body, child_stop in officeart.children(doc, body, stop, budget):
                if child == RT_INTERACTIVE_INFO and (found := _atom(doc, child_body, child_stop, budget)):
                    yield found


def _atom(doc: bytes, start: int, end: int, budget: Budget) -> tuple[int, int, int] | None:
    """(offset, ExHyperlink id, hyperlinkType) of the InteractiveInfoAtom in ``doc[start:end]`` if its action is a
    hyperlink."""
    for rec_type, _, _, body, stop in officeart.children(doc, start, end, budget):
        if rec_type == RT_INTERACTIVE_INFO_ATOM and stop - body >= 13 and doc[body + 8] == ACTION_HYPERLINK:
            return body, struct.unpack_from("<I", doc, body + 4)[0], doc[body + 12]
    return None


def text_boxes(doc: bytes, start: int, end: int, budget: Budget) -> list[tuple[int, int]]:
    """(start, end) of the records of each client text box of the drawing records in ``doc[start:end]``."""
    return [(body, stop) for rec_type, _, _, body, stop, _ in officeart.walk(doc, start, end, budget)
            if rec_type == RT_CLIENT_TEXTBOX]


def read(ole: olefile.OleFileIO, inventory: Inventory, budget: Budget) -> None:
    """The report's ``hyperlinks`` of a .ppt: on each live slide, the distinct places its hyperlinks go to; and
    where they are (``where``: "slide n" once for each)."""
    doc, current = stream(ole, "PowerPoint Document"), stream(ole, "Current User")
    if doc is None or current is None:
        return
    show = ppt._Presentation(doc, current, budget)
    listed = exhyperlinks(doc, show, budget)
    if not listed:  # every hyperlink names an ExHyperlink: a deck without one has none (most decks)
        inventory.counts["hyperlinks"], inventory.where["hyperlinks"] = 0, []
        return
    entries = hyperlink_list(stream(ole, SUMMARY)) or []
    places = {number: entries[index] if index < len(entries) and any(entries[index]) else (target, location)
              for index, (number, target, location) in enumerate(listed)}
    texts = slide_text_records(doc, show, budget)
    where: list[str] = []
    for slide, located in enumerate(show.slide_containers()):
        links = [(number, kind) for _, number, kind, shows in text_links(doc, *texts.get(slide, (0, 0)), budget)
                 if shows]
        if located is not None:
            links += [(number, kind) for _, number, kind in shape_links(doc, *located, budget)]
            for box in text_boxes(doc, *located, budget):
                links += [(number, kind) for _, number, kind, shows in text_links(doc, *box, budget) if shows]
        goes = {places[number] for number, kind in links if kind not in JUMPS and any(places.get(number, ("", "")))}
        where += [f"slide {slide + 1}"] * len(goes)
    inventory.counts["hyperlinks"] = len(where)
    inventory.where["hyperlinks"] = where


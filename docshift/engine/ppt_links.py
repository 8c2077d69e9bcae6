"""A deck's hyperlinks, handed whole to LibreOffice.

PowerPoint keeps the address of each hyperlink of a deck in the ``_PID_HLINKS`` property of the user-defined
property set of its ``DocumentSummaryInformation`` stream ([MS-OSHARED] 2.3.3.1.18): one entry per ExHyperlink of
the document's ExObjList, in their order, which is how LibreOffice's import pairs them. Its reader of property sets
(``Section::Read`` in sd's ``propread.cxx``) cuts each property to the section's declared size (at most what the
stream holds past the section) less the section's offset in the stream: a length less a position. A set that starts
n bytes into the stream so loses the last n bytes of any property as long as the set itself; the hyperlink list
stops at the last entry that is whole, and every hyperlink after it is no link on its slide, a shape's or a text's
(the corpus's 42520.ppt: 9 of its 19 links kept, by a plain ``soffice`` too). Only a list cut to nothing makes the
import take each ExHyperlink's own target instead, where it has one (41246-1.ppt).

LibreOffice gets a copy whose ``DocumentSummaryInformation`` has each set that would be cut followed by as many
bytes of padding as its offset, and declared that much longer: what it cuts is then the padding. The properties are
unchanged; the copy keeps the file's name (LibreOffice shows it in fields). The customer's file is left as it is,
and what the inventory counts is read of it.

A hyperlink in text costs LibreOffice's import something else, though: it becomes a field, one character of the
paragraph, and the import of a slide's paragraph-by-paragraph animation (an AnimationInfoAtom, or PowerPoint 2002's
time nodes) places each step by the characters of PowerPoint's text, so that the steps after such a link fall on
later paragraphs, or on none (customGeo.ppt's last slide: two links, and three of its nine steps moved). So a text
hyperlink that LibreOffice lost to the cut, on a slide that animates, stays lost: in the copy its InteractiveInfoAtom
names no ExHyperlink (``UNLINKED``), and the slide's animation is what it was. The links of shapes, and those in the
text of slides that do not animate, are all kept.
"""

import itertools
import struct
from pathlib import Path

from docshift.engine import cfb
from docshift.engine.inventory import officeart, ppt
from docshift.engine.inventory.common import Budget

STREAM = "\x05DocumentSummaryInformation"
HEADER = 28  # byte order, version, system identifier, CLSID, number of sets
SET_ENTRY = 20  # FMTID and offset of each set
MOST_SETS = 2  # LibreOffice reads none of a stream that says it holds more
MOST_STREAM = 1 << 20  # larger is no property stream PowerPoint writes: left as it is
USER_DEFINED = bytes.fromhex("05d5cdd59c2e1b10939708002b2cf9ae")  # FMTID_UserDefinedProperties
VT_I4, VT_LPWSTR, VT_BLOB = 0x03, 0x1F, 0x41
ENTRY_NUMBERS = 4  # a _PID_HLINKS entry: dwHash, dwApp, dwOfficeArt, dwInfo (VT_I4 each), then two strings
RT_EXOBJ_LIST, RT_EXHYPERLINK, RT_EXHYPERLINK_ATOM = 0x0409, 0x0FD7, 0x0FD3
RT_INTERACTIVE_INFO_ATOM, RT_CLIENT_TEXTBOX = 0x0FF3, 0xF00D
ANIMATIONS = {0x0FF1, 0xF144}  # AnimationInfoAtom; PowerPoint 2002's extTimeNodeContainer
ACTION_HYPERLINK = 4
UNLINKED = 0xFFFFFFFF  # an ExHyperlink id no deck holds


def padded(data: bytes) -> bytes | None:
    """The ``DocumentSummaryInformation`` stream ``data`` laid out again with each property set that LibreOffice
    would cut padded as far as its offset; None where it cuts none (or the stream is not one it reads)."""
    if len(data) < HEADER or len(data) > MOST_STREAM or data[:2] != b"\xfe\xff":
        return None
    count = struct.unpack_from("<I", data, HEADER - 4)[0]
    if not 0 < count <= MOST_SETS or HEADER + SET_ENTRY * count > len(data):
        return None
    sets = []
    for index in range(count):
        offset = struct.unpack_from("<I", data, HEADER + SET_ENTRY * index + 16)[0]
        if offset + 8 > len(data):
            return None
        size = min(struct.unpack_from("<I", data, offset)[0], len(data) - offset)
        sets.append((offset, data[offset:offset + size]))
    if not any(_cut(body, offset) for offset, body in sets):
        return None
    out = bytearray(data[:HEADER + SET_ENTRY * count])
    for index, (_, body) in enumerate(sets):
        out += bytes(-len(out) % 4)
        at = len(out)
        padding = _cut(body, at)
        struct.pack_into("<I", out, HEADER + SET_ENTRY * index + 16, at)
        out += body
        if padding:  # as long as its new offset, which is what LibreOffice takes off
            struct.pack_into("<I", out, at, len(body) + at)
            out += bytes(at)
    return bytes(out)


def _cut(body: bytes, offset: int) -> bool:
    """Whether LibreOffice cuts a property of the set ``body``, found ``offset`` bytes into its stream: one of its
    properties (told apart by their offsets) is longer than the set's size less that offset."""
    if len(body) < 8 or offset >= len(body):  # a size below the offset: LibreOffice's subtraction wraps, cutting none
        return False
    count = struct.unpack_from("<I", body, 4)[0]
    starts = sorted({struct.unpack_from("<I", body, 12 + 8 * index)[0]
                     for index in range(min(count, (len(body) - 8) // 8))} | {len(body)})
    return any(end - start > len(body) - offset for start, end in itertools.pairwise(starts))


def kept_entries(data: bytes) -> int | None:
    """How many entries of the hyperlink list (the user-defined set's ``_PID_HLINKS``: its VT_BLOB of a vector of
    VT_I4 and VT_LPWSTR values) LibreOffice reads whole from the summary stream ``data``; None where it has none."""
    count = struct.unpack_from("<I", data, HEADER - 4)[0] if len(data) >= HEADER else 0
    for index in range(min(count, MOST_SETS)):
        at = HEADER + SET_ENTRY * index
        if at + SET_ENTRY > len(data) or data[at:at + 16] != USER_DEFINED:
            continue
        offset = struct.unpack_from("<I", data, at + 16)[0]
        if offset + 8 > len(data):
            return None
        size, properties = struct.unpack_from("<II", data, offset)
        for number in range(min(properties, (len(data) - offset - 8) // 8)):
            start = offset + struct.unpack_from("<I", data, offset + 12 + 8 * number)[0]
            if start + 12 <= len(data) and struct.unpack_from("<I", data, start)[0] == VT_BLOB:
                # what LibreOffice reads of a property: the set's size (at most what the stream holds after it)
                # less its offset, unless that wraps
                held = min(size, len(data) - offset)
                limit = held - offset if held >= offset else len(data)
                entries = _entries(data[start:start + max(0, limit)])
                if entries is not None:
                    return entries
    return None


def _entries(value: bytes) -> int | None:
    """The whole entries of a VT_BLOB hyperlink list ``value`` (its type, size and vector), as far as it goes;
    None where it is no such list."""
    if len(value) < 12:
        return None
    values, at, whole = struct.unpack_from("<I", value, 8)[0], 12, 0
    if values % 6:
        return None
    for _ in range(values // 6):
        for _ in range(ENTRY_NUMBERS):
            if at + 8 > len(value) or struct.unpack_from("<I", value, at)[0] != VT_I4:
                return whole
            at += 8
        for _ in range(2):
            if at + 8 > len(value) or struct.unpack_from("<I", value, at)[0] != VT_LPWSTR:
                return whole
            length = struct.unpack_from("<I", value, at + 4)[0]
            at += 8 + 2 * length + (2 if length & 1 else 0)  # each string aligned to 4 bytes
            if at > len(value):
                return whole
        whole += 1
    return whole


def unlinked(doc: bytes, current: bytes, kept: int) -> list[int]:
    """The offsets in the "PowerPoint Document" stream ``doc`` of the exHyperlinkIdRef of each text hyperlink on a
    slide that animates whose ExHyperlink is the ``kept``-th of the document's list or later: those LibreOffice
    loses to the cut, and which would move that slide's animation steps if kept."""
    budget = Budget()
    show = ppt._Presentation(doc, current, budget)
    links = _hyperlinks(doc, show, budget)
    # with no entry read, LibreOffice takes each ExHyperlink's own target, where it has one
    lost = {number for number, _ in links[kept:]} if kept else {number for number, target in links if not target}
    texts = _slide_texts(doc, show, budget)
    found = []
    for slide, located in enumerate(show.slide_containers()):
        if located is None or not any(rec_type in ANIMATIONS for rec_type, *_ in officeart.walk(doc, *located, budget)):
            continue
        boxes = [(body, stop) for rec_type, _, _, body, stop, _ in officeart.walk(doc, *located, budget)
                 if rec_type == RT_CLIENT_TEXTBOX]
        for start, end in boxes + texts.get(slide, []):
            for rec_type, _, _, body, stop, _ in officeart.walk(doc, start, end, budget):
                if rec_type == RT_INTERACTIVE_INFO_ATOM and stop - body >= 16 and doc[body + 8] == ACTION_HYPERLINK \
                        and struct.unpack_from("<I", doc, body + 4)[0] in lost:
                    found.append(body + 4)
    return found


def _hyperlinks(doc: bytes, show: ppt._Presentation, budget: Budget) -> list[tuple[int, bool]]:
    """(id, whether it names a target) of each ExHyperlink of the document's ExObjList, in order."""
    links: list[tuple[int, bool]] = []
    for rec_type, _, _, body, stop in officeart.children(doc, *show.document, budget):
        if rec_type != RT_EXOBJ_LIST:
            continue
        for child, _, _, child_body, child_stop in officeart.children(doc, body, stop, budget):
            if child != RT_EXHYPERLINK:
                continue
            records = list(officeart.children(doc, child_body, child_stop, budget))
            number = next((struct.unpack_from("<I", doc, atom)[0] for kind, _, _, atom, end in records
                           if kind == RT_EXHYPERLINK_ATOM and end - atom >= 4), None)
            if number is not None:
                links.append((number, any(kind == ppt.RT_CSTRING and instance == 1 and end > atom
                                          for kind, instance, _, atom, end in records)))
    return links


def _slide_texts(doc: bytes, show: ppt._Presentation, budget: Budget) -> dict[int, list[tuple[int, int]]]:
    """{slide number (from 0): [(start, end)]} of the records the slide list holds for each slide's text."""
    texts: dict[int, list[tuple[int, int]]] = {}
    for rec_type, instance, _, body, stop in officeart.children(doc, *show.document, budget):
        if rec_type == ppt.RT_SLIDE_LIST and instance == 0:
            slide = -1
            for child, _, _, child_body, child_stop in officeart.children(doc, body, stop, budget):
                if child == ppt.RT_SLIDE_PERSIST:
                    slide += 1
                elif slide >= 0:
                    texts.setdefault(slide, []).append((child_body - 8, child_stop))
    return texts


def given_whole(source: Path, workdir: Path) -> Path | None:
    """A copy of the .ppt ``source`` in ``workdir`` whose hyperlinks LibreOffice reads whole, or None where it
    reads them whole as it is (or the file cannot be read and written again: LibreOffice gets it as it is)."""
    try:
        with cfb.CompoundFile(source) as ole:
            if not ole.exists(STREAM) or ole.get_size(STREAM) > MOST_STREAM:
                return None
            summary = ole.openstream(STREAM).read()
            stream = padded(summary)
            if stream is None:
                return None
            root = cfb.read_storage(ole, "", 2 * source.stat().st_size)
        streams = {child.name: child for child in root.children if child.data is not None}
        streams[STREAM].data = stream
        kept = kept_entries(summary)
        document, current = streams.get("PowerPoint Document"), streams.get("Current User")
        if kept is not None and document is not None and current is not None and document.data is not None:
            data = bytearray(document.data)
            for at in unlinked(document.data, current.data or b"", kept):
                struct.pack_into("<I", data, at, UNLINKED)
            document.data = bytes(data)
        written = cfb.write(root)
    except Exception:  # olefile raises many kinds on a damaged file, cfb ValueError on one it cannot write
        return None
    target = workdir / "links" / source.name
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    target.write_bytes(written)
    return target

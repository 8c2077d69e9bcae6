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
from docshift.engine.inventory import ppt_links as links
from docshift.engine.inventory.common import Budget

STREAM, HEADER, SET_ENTRY = links.SUMMARY, links.HEADER, links.SET_ENTRY
MOST_STREAM = 1 << 20  # larger is no property stream PowerPoint writes: left as it is
ANIMATIONS = {0x0FF1, 0xF144}  # AnimationInfoAtom; PowerPoint 2002's extTimeNodeContainer
UNLINKED = 0xFFFFFFFF  # an ExHyperlink id no deck holds


def padded(data: bytes) -> bytes | None:
    """The ``DocumentSummaryInformation`` stream ``data`` laid out again with each property set that LibreOffice
    would cut padded as far as its offset; None where it cuts none (or the stream is not one it reads)."""
    listed = links.property_sets(data, links.MOST_SETS) if len(data) <= MOST_STREAM else None
    if not listed or any(offset + 8 > len(data) for _, offset in listed):
        return None
    sets = [(offset, data[offset:offset + min(struct.unpack_from("<I", data, offset)[0], len(data) - offset)])
            for _, offset in listed]
    if not any(_cut(body, offset) for offset, body in sets):
        return None
    out = bytearray(data[:HEADER + SET_ENTRY * len(sets)])
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
    starts = sorted({*links.property_starts(body, 0), len(body)})
    return any(end - start > len(body) - offset for start, end in itertools.pairwise(starts))


def kept_entries(data: bytes) -> int | None:
    """How many entries of the hyperlink list (``_PID_HLINKS``) LibreOffice reads whole from the summary stream
    ``data``; None where it has none."""
    found = links.hyperlink_property(data)
    if found is None:
        return None
    offset, start = found
    # what LibreOffice reads of a property: the set's size (at most what the stream holds after it) less its offset,
    # unless that wraps
    held = min(struct.unpack_from("<I", data, offset)[0], len(data) - offset)
    limit = held - offset if held >= offset else len(data)
    return len(links.entries(data[start:start + limit]) or [])


def unlinked(doc: bytes, current: bytes, kept: int) -> list[int]:
    """The offsets in the "PowerPoint Document" stream ``doc`` of the exHyperlinkIdRef of each text hyperlink on a
    slide that animates whose ExHyperlink is the ``kept``-th of the document's list or later: those LibreOffice
    loses to the cut, and which would move that slide's animation steps if kept."""
    budget = Budget()
    show = ppt._Presentation(doc, current, budget)
    listed = links.exhyperlinks(doc, show, budget)
    # with no entry read, LibreOffice takes each ExHyperlink's own target, where it has one
    lost = {number for number, _, _ in listed[kept:]} if kept else \
        {number for number, target, _ in listed if not target}
    texts = links.slide_text_records(doc, show, budget)
    found = []
    for slide, located in enumerate(show.slide_containers()):
        if located is None or not any(rec_type in ANIMATIONS for rec_type, *_ in officeart.walk(doc, *located, budget)):
            continue
        for start, end in [*links.text_boxes(doc, *located, budget), texts.get(slide, (0, 0))]:
            found += [at + 4 for at, number, _, _ in links.text_links(doc, start, end, budget) if number in lost]
    return found


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

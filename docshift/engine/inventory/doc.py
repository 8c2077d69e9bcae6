"""The counts of a .doc ([MS-DOC]): its FIB, piece table, PlcfandRef, PlcfHdd, CHPX and DggInfo, and its
``ObjectPool``. Of a Word 6/95 file only the text and the objects."""

import struct
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import olefile

from docshift.engine.inventory import officeart
from docshift.engine.inventory.common import (
    CONTROL,
    Budget,
    Inventory,
    Unreadable,
    attempt,
    characters,
    embedded_objects,
    fold,
    stream,
)
from docshift.engine.inventory.doc_bullets import operands, unused_store
from docshift.engine.inventory.doc_bullets import sprms as _sprms
from docshift.engine.inventory.doc_fields import COMPUTED, visible

FIB_ENCRYPTED, FIB_WHICH_TABLE, FIB_COMPLEX = 0x0100, 0x0200, 0x0004
# indexes of FibRgFcLcb97 pairs (the same order as Word 6's FIB, whose pairs start at 0x58)
PAIR_PLCF_AND_REF, PAIR_PLCF_SED, PAIR_PLCF_HDD, PAIR_PLCF_BTE_CHPX, PAIR_DOP, PAIR_CLX, PAIR_DGG_INFO = (
    4, 6, 11, 12, 31, 33, 50)
PAIR_PLC_SPA_HDR = 41
SPRM_FSPEC, SPRM_PIC_LOCATION, SPRM_FOLE2, SPRM_FDATA, SPRM_TITLE_PAGE = 0x0855, 0x6A03, 0x080A, 0x0806, 0x300A
SPRM_BREAK_CODE, BREAK_CONTINUOUS = 0x3009, 0
SPRM_SYMBOL = 0x6A09  # a symbol: a "(" in the text, shown as the character its operand (ftc, xchar) names
# a continuous section this long may run onto a page of its own (a page holds more: this leans to reporting a loss)
PAGE_OF_TEXT = 1500
ANNOTATION_SIZE = 4 + 30  # a CP and an ATRDPre10


@dataclass
class _Word:
    """The parts of a Word binary file that the counts read: its streams, FIB values and piece table."""
    word: bytes
    table: bytes
    nfib: int
    flags: int
    ccp: list[int]   # ccpText, ccpFtn, ccpHdd, ccpMcr, ccpAtn
    pairs: list[tuple[int, int]]  # [(fc, lcb)]
    pieces: list[tuple[int, int, int, bool]]  # [(cp start, cp end, fc, compressed)]
    runs: list[tuple[int, int, dict[int, bytes]]] | None = None  # ``character_runs``, once read

    def pair(self, index: int) -> tuple[int, int]:
        return self.pairs[index] if index < len(self.pairs) else (0, 0)

    def text(self, start: int, end: int) -> str:
        """The characters of CPs ``start`` to ``end``, from the pieces that hold them."""
        parts = []
        for cp_start, cp_end, fc, compressed in self.pieces:
            low, high = max(start, cp_start), min(end, cp_end)
            if low >= high:
                continue
            if compressed:
                offset = fc + (low - cp_start)
                parts.append(self.word[offset:offset + high - low].decode("cp1252", "replace"))
            else:
                offset = fc + 2 * (low - cp_start)
                parts.append(self.word[offset:offset + 2 * (high - low)].decode("utf_16_le", "replace"))
        return "".join(parts)

    def cp(self, fc: int) -> int | None:
        """The CP of the character at byte offset ``fc`` of the WordDocument stream; None outside the text's pieces."""
        for cp_start, cp_end, start, compressed in self.pieces:
            width = 1 if compressed else 2
            if start <= fc < start + (cp_end - cp_start) * width:
                return cp_start + (fc - start) // width
        return None


def _fib(word: bytes, table_of: Callable[[str], bytes | None]) -> _Word:
    """The :class:`_Word` of the WordDocument stream ``word`` (``table_of(name)`` reads a table stream)."""
    ident, nfib = struct.unpack_from("<HH", word, 0)
    flags = struct.unpack_from("<H", word, 0x0A)[0]
    if ident not in (0xA5EC, 0xA5DC) or flags & FIB_ENCRYPTED:
        raise Unreadable("no Word FIB, or encrypted")
    if nfib >= 0xC0:  # Word 97 and later: FibBase, FibRgW97, FibRgLw97, FibRgFcLcb
        csw = struct.unpack_from("<H", word, 32)[0]
        pos = 34 + 2 * csw
        cslw = struct.unpack_from("<H", word, pos)[0]
        lw = struct.unpack_from(f"<{cslw}I", word, pos + 2)
        pos += 2 + 4 * cslw
        pairs_count = struct.unpack_from("<H", word, pos)[0]
        raw = struct.unpack_from(f"<{2 * pairs_count}I", word, pos + 2)
        ccp = list(lw[3:8])
        table = table_of("1Table" if flags & FIB_WHICH_TABLE else "0Table")
    else:  # Word 6 and 95: one fixed layout, the table data inside the WordDocument stream
        ccp = list(struct.unpack_from("<5I", word, 0x34))
        raw = struct.unpack_from("<112I", word, 0x58)
        table = word
    if table is None:
        raise Unreadable("no table stream")
    pairs = [(raw[2 * i], raw[2 * i + 1]) for i in range(len(raw) // 2)]
    return _Word(word, table, nfib, flags, ccp, pairs, [])


def _pieces(doc: _Word) -> list[tuple[int, int, int, bool]]:
    """The piece table of the CLX: [(cp start, cp end, fc, compressed)]."""
    fc, lcb = doc.pair(PAIR_CLX)
    table, modern = doc.table, doc.nfib >= 0xC0
    if not lcb:
        if modern or doc.flags & FIB_COMPLEX:
            raise Unreadable("no piece table")
        fc_min = struct.unpack_from("<I", doc.word, 0x18)[0]  # Word 6 non-complex: one run of 8-bit text
        return [(0, sum(doc.ccp) + 1, fc_min, True)]
    pos, end = fc, min(fc + lcb, len(table))
    while pos < end and table[pos] == 0x01:  # Prc: property modifiers before the piece table
        pos += 3 + struct.unpack_from("<H", table, pos + 1)[0]
    if pos >= end or table[pos] != 0x02:
        raise Unreadable("no Pcdt")
    length = struct.unpack_from("<I", table, pos + 1)[0]
    pos += 5
    count = (length - 4) // 12
    if count <= 0 or pos + length > len(table):
        raise Unreadable("bad piece table")
    cps = struct.unpack_from(f"<{count + 1}I", table, pos)
    pieces = []
    for index in range(count):
        value = struct.unpack_from("<I", table, pos + 4 * (count + 1) + 8 * index + 2)[0]
        if modern:
            compressed = bool(value & 0x40000000)
            offset = (value & 0x3FFFFFFF) // 2 if compressed else value & 0x3FFFFFFF
        else:
            compressed, offset = True, value
        if cps[index + 1] > cps[index]:
            pieces.append((cps[index], cps[index + 1], offset, compressed))
    return pieces


def _has_content(text: str) -> bool:
    """Does a header/footer story show anything: text, or a picture or drawing (0x01, 0x08)?"""
    text = visible(text)
    return "\x01" in text or "\x08" in text or bool("".join(text.translate(CONTROL).split()))


def read(ole: olefile.OleFileIO, inventory: Inventory, budget: Budget, path: str | Path) -> None:
    """Counts of a .doc: FIB, piece table, PlcfandRef, PlcfHdd, CHPX and DggInfo, ObjectPool."""
    counts = inventory.counts
    word = stream(ole, "WordDocument")
    if word is None:
        return
    doc = _fib(word, lambda name: stream(ole, name))  # raises for an encrypted file: all stays unknown
    counts["embedded_objects"] = attempt(embedded_objects, ole, "ObjectPool")
    doc.pieces = _pieces(doc)
    inventory.text = characters(visible(doc.text(0, doc.ccp[0]), COMPUTED))
    if doc.nfib < 0xC0:
        # Word 6/95: 8-bit text in the code page of each run's font, which is not read here: the characters
        # beyond ASCII count as one kind. Annotations, headers and pictures have other layouts: unknown.
        inventory.text = fold(inventory.text)
        counts["characters"] = inventory.text.total()
        return
    attempt(_symbols, doc, inventory.text, budget)
    counts["characters"] = inventory.text.total()
    _, lcb = doc.pair(PAIR_PLCF_AND_REF)
    counts["comments"] = max(0, (lcb - 4) // ANNOTATION_SIZE) if lcb else 0
    stories = attempt(_shown_stories, doc)
    counts["headers_footers"] = None if stories is None else len(stories[0])
    if stories and stories[0]:
        sections = _sections(doc)
        inventory.sections = len(sections)
        for index, (_, _, at) in enumerate(sections):
            if index and at is not None and any(6 + 6 * index <= story < 12 + 6 * index for story in stories[0]):
                inventory.continuous_headers[index] = at  # its own stories are 6 + 6 * index onwards
    data = attempt(stream, ole, "Data")
    counts["images"] = None if stories is None else attempt(_images, doc, data, budget, _hidden_stories(*stories))


def _symbols(doc: _Word, text: Counter[str], budget: Budget) -> None:
    """Count each symbol of the main text (a "(" with sprmCSymbol: Wingdings' arrow, Symbol's bullet) as the
    character it shows, as the result's ``w:sym`` is counted."""
    if not text["("]:
        return
    for start, end, properties in character_runs(doc, budget):
        symbol = properties.get(SPRM_SYMBOL, b"")
        if len(symbol) < 4:
            continue
        moved = min(text["("], sum(1 for _, cp in special_characters(doc, start, end, "(", budget) if cp < doc.ccp[0]))
        text["("] -= moved
        text[chr(struct.unpack_from("<H", symbol, 2)[0])] += moved


def _hidden_stories(shown: set[int], cps: tuple[int, ...], sections: int) -> list[tuple[int, int]]:
    """The CP ranges, in the header document, of the header/footer stories with text that no page shows: a first
    page's without a title page, an even page's without facing pages (of ``_shown_stories``)."""
    return [(cps[story], cps[story + 1]) for story in range(6, min(len(cps) - 1, 6 + 6 * sections))
            if story not in shown and cps[story + 1] > cps[story]]


def _shown_stories(doc: _Word) -> tuple[set[int], tuple[int, ...], int]:
    """(the header/footer stories that show something on some page: a section's own, or the one an empty story
    (linked to the previous section) takes over from an earlier section; PlcfHdd; how many sections were read)."""
    fc, lcb = doc.pair(PAIR_PLCF_HDD)
    if lcb < 8:
        return set(), (), 0
    cps = struct.unpack_from(f"<{lcb // 4}I", doc.table, fc)
    start = doc.ccp[0] + doc.ccp[1]
    facing = False
    dop_fc, dop_lcb = doc.pair(PAIR_DOP)
    if dop_lcb:
        facing = bool(doc.table[dop_fc] & 1)
    sections = _sections(doc)
    current: list[int | None] = [None] * 6  # by role, the story in effect (None: none, or it shows nothing)
    shown: set[int] = set()
    for story in range(6, len(cps) - 1):
        section, role = divmod(story - 6, 6)
        if section >= max(1, len(sections)):
            break
        title, pages, _ = sections[section] if section < len(sections) else (False, True, None)
        if cps[story + 1] > cps[story]:
            current[role] = story if _has_content(doc.text(start + cps[story], start + cps[story + 1])) else None
        if pages and (role not in (0, 2) or facing) and (role not in (4, 5) or title) and current[role]:
            shown.add(current[role])  # type: ignore[arg-type]
    return shown, cps, len(sections)


class _Section(NamedTuple):
    title: bool  # a title page: its first page has headers of its own
    shown: bool  # its own headers show on some page
    continuous_at: int | None  # a continuous section's: where, in the WordDocument stream, its break code is


def _sections(doc: _Word) -> list[_Section]:
    """Each section, from its SEPX. Word shows a section's headers and footers on the pages that begin in it: a
    continuous section (one that does not start a page) shows them only when a page begins inside it, at a page
    break or when it runs long."""
    sed_fc, sed_lcb = doc.pair(PAIR_PLCF_SED)
    count = (sed_lcb - 4) // 16 if sed_lcb >= 20 else 0
    bounds = struct.unpack_from(f"<{count + 1}I", doc.table, sed_fc) if count else ()
    sections = []
    for index in range(count):
        sepx = struct.unpack_from("<I", doc.table, sed_fc + 4 * (count + 1) + 12 * index + 2)[0]
        title, continuous_at = False, None
        if sepx != 0xFFFFFFFF and sepx + 2 <= len(doc.word):
            size = struct.unpack_from("<H", doc.word, sepx)[0]
            grpprl = doc.word[sepx + 2:sepx + 2 + size]
            for sprm, start, end in operands(grpprl):
                if sprm == SPRM_TITLE_PAGE and end > start:
                    title = bool(grpprl[start])
                elif sprm == SPRM_BREAK_CODE and end > start:
                    continuous_at = sepx + 2 + start if grpprl[start] == BREAK_CONTINUOUS else None
        shown = True
        if continuous_at is not None and index:
            text = doc.text(bounds[index], bounds[index + 1] - 1)  # the last character is the section mark
            shown = "\x0c" in visible(text) or len(text) >= PAGE_OF_TEXT
        sections.append(_Section(title, shown, continuous_at))
    return sections


def _images(doc: _Word, data: bytes | None, budget: Budget, hidden: list[tuple[int, int]]) -> int:
    """Distinct pictures: inline ones (CHPX runs with a picture location on a live 0x01) and the floating
    shapes of the OfficeArt drawing (DggInfo); none that only a header or footer no page shows holds."""
    found: set[Any] = set()
    word = doc.word
    headers = doc.ccp[0] + doc.ccp[1]
    pictures, ole_runs = [], []
    for start, end, properties in character_runs(doc, budget):
        if properties.get(SPRM_FOLE2, b"\0")[:1] == b"\1":
            ole_runs.append((start, end))
            continue
        location = properties.get(SPRM_PIC_LOCATION)
        if location is None or len(location) < 4 or properties.get(SPRM_FSPEC, b"\0")[:1] != b"\1" \
                or properties.get(SPRM_FDATA, b"\0")[:1] == b"\1":
            continue
        pictures.append((start, end, struct.unpack_from("<I", location)[0]))
    locations = set()
    unused = unused_store(doc.table, doc.pair) if pictures else None  # picture bullets no list shows
    for start, end, location in pictures:
        for position, cp in special_characters(doc, start, end, "\x01", budget):
            # the picture right after the separator of an EMBED field (an fOle2 run) is the object's preview
            if not any(low < position <= high for low, high in ole_runs) and \
                    not any(low <= cp - headers < high for low, high in hidden) and \
                    not (unused and unused[0] <= cp < unused[1]):
                locations.add(location)
                break
    for location in locations:
        uid = _inline_picture(data, location, budget) if data else None
        if uid is not None:
            found.add(uid)
    fc, lcb = doc.pair(PAIR_DGG_INFO)
    if lcb:
        table, end = doc.table, min(fc + lcb, len(doc.table))
        _, _, rec_type, body, stop = officeart.header(table, fc)
        bstore = officeart.bstore(table, body, min(stop, end), budget) if rec_type == officeart.OA_DGG else []
        shapes, pos, unseen = [], min(stop, end), _hidden_shapes(doc, hidden)
        while pos + 9 <= end:
            _, _, rec_type, body, stop = officeart.header(table, pos + 1)  # a dgglbl byte before each drawing
            if rec_type != 0xF002:
                break
            shapes += _drawn(table, body, min(stop, end), budget, unseen if table[pos] == 1 else set())
            pos = stop
        found |= officeart.pictures(shapes, bstore, lambda entry: entry[1] < len(word) or entry[3])
    return len(found)


def _hidden_shapes(doc: _Word, hidden: list[tuple[int, int]]) -> set[int]:
    """The spids of the header document's shapes (PlcSpaHdr's FSPAs) anchored only in ``hidden`` stories."""
    fc, lcb = doc.pair(PAIR_PLC_SPA_HDR)
    count = (lcb - 4) // 30 if lcb >= 34 and hidden else 0
    anchors = [(struct.unpack_from("<I", doc.table, fc + 4 * index)[0],
                struct.unpack_from("<I", doc.table, fc + 4 * (count + 1) + 26 * index)[0]) for index in range(count)]
    return {spid for _, spid in anchors} - {spid for cp, spid in anchors if not any(a <= cp < b for a, b in hidden)}


def _drawn(table: bytes, start: int, end: int, budget: Budget, hidden: set[int]) -> list[officeart.Shape]:
    """The shapes of an OfficeArt drawing, but for its top-level shapes and groups whose spid is ``hidden``."""
    if not hidden:
        return officeart.shapes(table, start, end, budget)
    shapes = []
    for rec_type, _, _, body, stop in officeart.children(table, start, end, budget):
        items = officeart.children(table, body, stop, budget) if rec_type == officeart.OA_SPGR else \
            [(rec_type, 0, 0, body, stop)]
        for _, _, _, item_body, item_stop in items:
            spid = next((struct.unpack_from("<I", table, fsp)[0] for kind, _, _, fsp, fsp_end, _ in
                         officeart.walk(table, item_body - 8, item_stop, budget)
                         if kind == officeart.OA_FSP and fsp_end - fsp >= 8), None)
            if spid not in hidden:
                shapes += officeart.shapes(table, item_body - 8, item_stop, budget)
    return shapes


def character_runs(doc: _Word, budget: Budget) -> list[tuple[int, int, dict[int, bytes]]]:
    """(first FC, FC past the end, {sprm: operand}) of each run whose character properties (CHPX in the FKP pages
    of PlcfBteChpx) are not the default; read once for the symbols and the pictures."""
    if doc.runs is None:
        doc.runs = list(_character_runs(doc, budget))
    return doc.runs


def _character_runs(doc: _Word, budget: Budget) -> Iterator[tuple[int, int, dict[int, bytes]]]:
    fc, lcb = doc.pair(PAIR_PLCF_BTE_CHPX)
    count = (lcb - 4) // 8 if lcb >= 12 else 0
    for index in range(count):
        page_number = struct.unpack_from("<I", doc.table, fc + 4 * (count + 1) + 4 * index)[0] & 0x3FFFFF
        page = doc.word[page_number * 512:page_number * 512 + 512]
        if len(page) < 512:
            continue
        runs = page[511]
        if 5 * runs + 4 > 511:
            continue
        budget.spend(runs + 1)
        bounds = struct.unpack_from(f"<{runs + 1}I", page, 0)
        for run in range(runs):
            offset = page[4 * (runs + 1) + run] * 2
            if offset:
                yield bounds[run], bounds[run + 1], dict(_sprms(page[offset + 1:offset + 1 + page[offset]]))


def special_characters(doc: _Word, start: int, end: int, char: str, budget: Budget) -> Iterator[tuple[int, int]]:
    """(byte offset in WordDocument, CP) of each ``char`` of the text pieces between ``start`` and ``end`` (FCs)."""
    for _, (cp_start, cp_end, fc, compressed) in zip(range(100_000), doc.pieces):
        width = 1 if compressed else 2
        low, high = max(start, fc), min(end, fc + (cp_end - cp_start) * width)
        if low >= high:
            continue
        low += (low - fc) % width
        budget.spend((high - low) // 4096)
        pattern = char.encode("latin-1") if compressed else char.encode("utf_16_le")
        position = doc.word.find(pattern, low, high)
        while position >= 0:
            if (position - fc) % width == 0:
                yield position, cp_start + (position - fc) // width
            position = doc.word.find(pattern, position + 1, high)


def _inline_picture(data: bytes, location: int, budget: Budget) -> Any:
    """The uid of the picture at ``location`` of the Data stream (PICF then OfficeArtInlineSpContainer), or None
    when there is no picture data there."""
    if location + 10 > len(data):
        return None
    size, header_size, mode = struct.unpack_from("<IHH", data, location)
    end = min(location + size, len(data))
    if size <= header_size:
        return None
    if mode not in (0x64, 0x66):  # [MS-DOC] allows no other mapping mode
        return None
    pos = location + header_size
    if mode == 0x66:
        pos += 1 + data[pos]
    shapes: list[officeart.Shape] = []
    entries: list[bytes] = []
    for rec_type, _, _, body, stop in officeart.children(data, pos, end, budget):
        if rec_type == officeart.OA_SP:
            shapes = officeart.shapes(data, body - 8, stop, budget)
        elif rec_type == officeart.OA_FBSE and stop - body > 36:
            entries.append(bytes(data[body + 2:body + 18]))
    if not entries:
        return None
    pibs = [pib for shape in shapes for pib in shape.pibs if 1 <= pib <= len(entries)]
    uid = entries[pibs[0] - 1] if pibs else entries[0]
    return uid if any(uid) else ("inline", location)

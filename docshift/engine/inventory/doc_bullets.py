"""Word 97 property modifiers (sprms, [MS-DOC] 2.6), and the pictures of a .doc's picture bullets.

Word keeps the pictures of a document's picture bullets in hidden text at the end of its main text, bookmarked
``_PictureBullets``; a list level shows one as its bullet when its character properties set sprmCPbiGrf's
fPicBullet (2.9.150 LVL). When no level does, those pictures show on no page, and LibreOffice leaves them out: the
count of the source's pictures does too. Any other picture in hidden text is counted, as LibreOffice keeps it.
"""

import struct
from collections.abc import Callable, Iterator

# FibRgFcLcb97's pairs: the bookmarks' names (SttbfBkmk), starts (PlcfBkf) and ends (PlcfBkl); the lists (PlfLst:
# a count and the LSTFs, each list's LVLs right after them)
PAIR_STTBF_BKMK, PAIR_PLCF_BKF, PAIR_PLCF_BKL, PAIR_PLF_LST = 21, 22, 23, 73
STORE = "_PictureBullets"
SPRM_PBI_GRF, PIC_BULLET = 0x4888, 0x01
LSTF_SIZE, LVLF_SIZE, LSTF_FLAGS, SIMPLE_LIST = 28, 28, 26, 0x01


def sprms(grpprl: bytes) -> Iterator[tuple[int, bytes]]:
    """(sprm, operand) of a grpprl (Word 97 two-byte sprms)."""
    for sprm, start, end in operands(grpprl):
        yield sprm, grpprl[start:end]


def operands(grpprl: bytes) -> Iterator[tuple[int, int, int]]:
    """(sprm, where its operand starts, where it ends) of a grpprl: offsets into ``grpprl``."""
    pos, end = 0, len(grpprl)
    while pos + 2 <= end:
        sprm = struct.unpack_from("<H", grpprl, pos)[0]
        pos += 2
        size = (1, 1, 2, 4, 2, 2, None, 3)[sprm >> 13]
        if size is None:
            if sprm == 0xD608 and pos + 2 <= end:
                size = struct.unpack_from("<H", grpprl, pos)[0] + 1
            elif pos < end:
                size = grpprl[pos] + 1
            else:
                return
        yield sprm, pos, min(pos + size, end)
        pos += size


def unused_store(table: bytes, pair: Callable[[int], tuple[int, int]]) -> tuple[int, int] | None:
    """The CPs (first, past the last) of the picture bullets' store when no list level shows one; else None.
    ``pair(index)`` is the FIB's (fc, lcb) pair ``index`` into the table stream."""
    store = _bookmark(table, pair, STORE)
    return None if store is None or _picture_bullets(table, *pair(PAIR_PLF_LST)) else store


def bookmark_names(table: bytes, pair: Callable[[int], tuple[int, int]]) -> list[str]:
    """The names of the document's bookmarks (its SttbfBkmk), in order; [] where they do not read (Word 6 and 95
    write 8-bit names)."""
    return strings(table, pair, PAIR_STTBF_BKMK)


def strings(table: bytes, pair: Callable[[int], tuple[int, int]], index: int) -> list[str]:
    """The strings of the STTB that FibRgFcLcb97's pair ``index`` places in the table stream, in order; [] where
    they do not read (Word 6 and 95 write 8-bit ones)."""
    fc, lcb = pair(index)
    if lcb < 6 or fc + 6 > len(table):
        return []
    extended, count, extra = struct.unpack_from("<HHH", table, fc)
    if extended != 0xFFFF:  # strings of 8-bit characters: Word 97 and later write UTF-16
        return []
    pos, found = fc + 6, list[str]()
    for _ in range(count):
        if pos + 2 > len(table):
            return found
        size = struct.unpack_from("<H", table, pos)[0]
        found.append(table[pos + 2:pos + 2 + 2 * size].decode("utf_16_le", "replace"))
        pos += 2 + 2 * size + extra
    return found


def _bookmark(table: bytes, pair: Callable[[int], tuple[int, int]], name: str) -> tuple[int, int] | None:
    """The CPs (first, past the last) of the bookmark ``name``, or None."""
    names = bookmark_names(table, pair)
    index = names.index(name) if name in names else None
    fc, lcb = pair(PAIR_PLCF_BKF)
    marks = (lcb - 4) // 8 if lcb >= 12 else 0  # n + 1 CPs, then an FBKF of 4 bytes (ibkl, bkc) for each
    if index is None or index >= marks or fc + 8 * marks + 4 > len(table):
        return None
    start = struct.unpack_from("<I", table, fc + 4 * index)[0]
    end_index = struct.unpack_from("<H", table, fc + 4 * (marks + 1) + 4 * index)[0]
    fc, lcb = pair(PAIR_PLCF_BKL)
    if lcb < 4 * (end_index + 1) or fc + 4 * (end_index + 1) > len(table):
        return None
    return start, struct.unpack_from("<I", table, fc + 4 * end_index)[0]


def _picture_bullets(table: bytes, fc: int, lcb: int) -> bool:
    """Whether a level of the lists in the PlfLst at ``table[fc:fc + lcb]`` shows a picture bullet."""
    if lcb < 2 or fc + 2 > len(table):
        return False
    lists = max(0, struct.unpack_from("<h", table, fc)[0])
    pos = fc + 2 + LSTF_SIZE * lists
    for index in range(lists):
        flags = fc + 2 + LSTF_SIZE * index + LSTF_FLAGS
        for _ in range(1 if flags < len(table) and table[flags] & SIMPLE_LIST else 9):
            if pos + LVLF_SIZE > len(table):
                return False
            chpx_size, papx_size = table[pos + 24], table[pos + 25]
            chpx = pos + LVLF_SIZE + papx_size
            if any(sprm == SPRM_PBI_GRF and operand[:1] and operand[0] & PIC_BULLET
                   for sprm, operand in sprms(table[chpx:chpx + chpx_size])):
                return True
            pos = chpx + chpx_size  # then the level's number text: a count of UTF-16 characters and them
            if pos + 2 > len(table):
                return False
            pos += 2 + 2 * struct.unpack_from("<H", table, pos)[0]
    return False

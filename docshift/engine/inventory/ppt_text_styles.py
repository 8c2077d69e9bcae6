"""Whether a .ppt's text formatting turns a text shadow on anywhere ([MS-PPT] 2.9): in a text's own runs (a
StyleTextPropAtom, 2.9.44), in a master's text styles (TextMasterStyleAtom, 2.9.35) or in the deck's default
character formatting (TextCFExceptionAtom, 2.9.14); and the fonts of a master's first level of text.

The worker asks LibreOffice for the shadowed text of a loaded deck only where this says there may be some
(``uno/shadows.py``): walking a deck's text took 6% of the corpus decks' conversion time, and 20 of 112 decks have
any. A record that does not parse counts as a shadow: the walk then decides.
"""

import struct

from docshift.engine.inventory.common import Unreadable

RT_STYLE_TEXT_PROP, RT_TEXT_MASTER_STYLE, RT_TEXT_CF_EXCEPTION = 0x0FA1, 0x0FA3, 0x0FA4
CF_SHADOW = 1 << 4  # CFMasks.shadow, and CFStyle.shadow in fontStyle
CF_FONT, CF_EAST_ASIAN_FONT = 16, 21  # CFMasks' typeface and oldEATypeface: fontRef and oldEAFontRef follow
# bold, italic, underline, shadow, fehint, kumi, emboss, fHasStyle and the unused bits among them: fontStyle is there
# (as PowerPoint's readers take it: any of the low 16 bits)
CF_STYLE = 0xFFFF
# CFMasks bit -> size of its field, in the order of the fields after fontStyle: fontRef, oldEAFontRef, ansiFontRef,
# symbolFontRef, fontSize, color, position, pp10runid and unused, newEAFontRef, csFontRef, pp11ext
CF_FIELDS = ((16, 2), (21, 2), (22, 2), (23, 2), (17, 2), (18, 4), (19, 2), (20, 4), (24, 2), (25, 2), (26, 4))
# PFMasks bits -> size of their field, in the field order (bulletFlags: any of hasBullet, bulletHasFont,
# bulletHasColor, bulletHasSize; wrapFlags: any of charWrap, wordWrap, overflow); 20 (tabStops) is counted
PF_FIELDS = ((0xF, 2), (1 << 7, 2), (1 << 4, 2), (1 << 6, 2), (1 << 5, 4), (1 << 11, 2), (1 << 12, 2),
             (1 << 13, 2), (1 << 14, 2), (1 << 8, 2), (1 << 10, 2), (1 << 15, 2), (1 << 20, 0), (1 << 16, 2),
             (7 << 17, 2), (1 << 21, 2))
MAX_RUNS = 1 << 16  # of one StyleTextPropAtom
PAST = "a text style runs past its record"


def _u32(data: bytes | bytearray, pos: int, end: int) -> int:
    if pos + 4 > end:
        raise Unreadable(PAST)
    return struct.unpack_from("<I", data, pos)[0]


def _cf(data: bytes | bytearray, pos: int, end: int) -> tuple[bool, int]:
    """(whether the TextCFException at ``pos`` turns the shadow on, where it ends)."""
    masks = _u32(data, pos, end)
    pos += 4
    shadow = False
    if masks & CF_STYLE:
        if pos + 2 > end:
            raise Unreadable(PAST)
        shadow = bool(masks & CF_SHADOW and data[pos] & CF_SHADOW)
        pos += 2
    pos += sum(size for bit, size in CF_FIELDS if masks >> bit & 1)
    if pos > end:
        raise Unreadable(PAST)
    return shadow, pos


def master_fonts(data: bytes | bytearray, start: int, end: int) -> tuple[int | None, int | None]:
    """(fontRef, oldEAFontRef) of the first level of the TextMasterStyleAtom body ``data[start:end]`` of a title's
    or a body's text (instances 0 and 1): the indices of its Latin and East Asian fonts in the deck's font
    collection, None where the level sets none. Unreadable where the record does not parse."""
    if start + 2 > end or not data[start]:
        raise Unreadable(PAST)
    pos = _pf(data, start + 2, end)
    masks = _u32(data, pos, end)
    _, stop = _cf(data, pos, end)
    pos += 4 + (2 if masks & CF_STYLE else 0)
    found: dict[int, int] = {}
    for bit, size in CF_FIELDS[:2]:  # fontRef, oldEAFontRef: the first two fields after fontStyle
        if masks >> bit & 1:
            found[bit] = struct.unpack_from("<H", data, pos)[0]
            pos += size
    if pos > stop:
        raise Unreadable(PAST)
    return found.get(CF_FONT), found.get(CF_EAST_ASIAN_FONT)


def _pf(data: bytes | bytearray, pos: int, end: int) -> int:
    """Where the TextPFException at ``pos`` ends."""
    masks = _u32(data, pos, end)
    pos += 4
    for bits, size in PF_FIELDS:
        if masks & bits:
            if size == 0:  # tabStops: a count, then that many TabStop records of 4 bytes
                if pos + 2 > end:
                    raise Unreadable(PAST)
                size = 2 + 4 * struct.unpack_from("<H", data, pos)[0]
            pos += size
    if pos > end:
        raise Unreadable(PAST)
    return pos


def runs_shadowed(data: bytes | bytearray, start: int, end: int, length: int) -> bool:
    """Whether the StyleTextPropAtom body ``data[start:end]`` of a text of ``length`` characters turns the shadow
    on in any character run (the runs cover the text and one more character, its end)."""
    try:
        pos, covered = start, 0
        for _ in range(MAX_RUNS):  # paragraph runs: count, indentLevel, a TextPFException
            if covered > length:
                break
            covered += _u32(data, pos, end)
            pos = _pf(data, pos + 6, end)
        covered = 0
        for _ in range(MAX_RUNS):  # character runs: count, a TextCFException
            if covered > length or pos >= end:
                return False
            covered += _u32(data, pos, end)
            shadow, pos = _cf(data, pos + 4, end)
            if shadow:
                return True
        return False
    except Unreadable:
        return True


def master_shadowed(data: bytes | bytearray, start: int, end: int, instance: int) -> bool:
    """Whether the TextMasterStyleAtom body ``data[start:end]`` of ``instance`` turns the shadow on at any level
    (each level a TextPFException and a TextCFException, preceded by its level number from instance 5 on)."""
    try:
        if start + 2 > end:
            raise Unreadable(PAST)
        pos = start + 2
        for _ in range(min(data[start], 5)):
            pos = _pf(data, pos + (2 if instance >= 5 else 0), end)
            shadow, pos = _cf(data, pos, end)
            if shadow:
                return True
        return False
    except Unreadable:
        return True


def default_shadowed(data: bytes | bytearray, start: int, end: int) -> bool:
    """Whether the TextCFExceptionAtom body ``data[start:end]`` turns the shadow on."""
    try:
        return _cf(data, start, end)[0]
    except Unreadable:
        return True


def shadowed(data: bytes | bytearray, rec_type: int, instance: int, start: int, end: int, length: int) -> bool:
    """Whether the record of ``rec_type`` and ``instance`` whose body is ``data[start:end]`` turns the shadow on:
    a StyleTextPropAtom (of a text of ``length`` characters), a TextMasterStyleAtom or a TextCFExceptionAtom."""
    if rec_type == RT_STYLE_TEXT_PROP:
        return runs_shadowed(data, start, end, length)
    if rec_type == RT_TEXT_MASTER_STYLE:
        return master_shadowed(data, start, end, instance)
    return rec_type == RT_TEXT_CF_EXCEPTION and default_shadowed(data, start, end)

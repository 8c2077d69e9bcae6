"""The colours Excel 2007 and later give an .xls's cells (theme colours, tints, any RGB), which LibreOffice writes as
the nearest colour of the workbook's 56-colour palette, put back into the .xlsx.

A cell format of an .xls names its fill's, its font's and its borders' colours by an index into the palette
([MS-XLS] 2.4.353 XF, 2.4.122 FONT). Excel 2007 and later choose colours from the workbook's theme, lighter or
darker by a tint, or any RGB; saving an .xls, they write the nearest palette colour there, and the colour itself in
an XFEXT record of the format (2.4.355: a FullColorExt, 2.5.155, of the fill's foreground and background, the text
and the borders), and the theme in the THEME record (2.4.326: the default Office theme, or its package). Excel reads
the XFEXT colours back. LibreOffice 25.2's import reads no XFEXT, and a plain ``soffice`` writes the palette's
colour: an accent blue 4F81BD lighter by 60% (B8CCE4, a table's banded row) comes out as the palette's 99CCFF, the
accent itself as 333399. Of 787 workbooks of the corpus, POI's tests and unseen sets 25-31, 44 have cells whose
fill, text or border so differs from Excel's: 41,636 cells (38,426 fills, 2,005 texts, 3,080 border sides).

``mend`` gives each cell whose XF has such a colour, where the result's fill, font or border of its style shows
another, a copy of its style with a copy of the fill, the font or the border in the XF's colour, as RGB (the
workbook's theme colour with its tint applied as ECMA-376 Part 1, 18.8.19 says, in floating point: a channel may
differ by one step from Excel's own). Theme colours are read where the THEME record holds the theme's package or
names an Office default theme known here (``DEFAULT_THEMES``: 2007's, 2013's, 2016's); under another version only
the RGB colours are put back. A pattern fill (LibreOffice mixes its colours into a solid one), a diagonal border and a
gradient fill stay as LibreOffice wrote them. Every other byte stays as LibreOffice wrote it.
"""

import colorsys
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from docshift.engine import biff, sheet_objects
from docshift.engine.embedding import PartEdit, edited, part_bytes, spliced
from docshift.engine.inventory.common import SCHEME_SLOTS, Palette, ThemeFont, attempt
from docshift.engine.inventory.package import Package
from docshift.engine.inventory.ppt_schemes import round_trip
from docshift.engine.sheet_numbers import Styles, styles_part_of
from docshift.engine.sheet_quotes import restyled_by
from docshift.engine.sheet_xf import Book
from docshift.errors import ResultUnreadable as Unreadable

BIFF_XFEXT, BIFF_THEME, BIFF_CONTINUEFRT12 = 0x087D, 0x0896, 0x087F
FILL_FORE, FILL_BACK, TEXT = 4, 5, 13  # an XFEXT property's type: the fill's colours, the font's
SIDES = {7: "top", 8: "bottom", 9: "left", 10: "right"}  # and the borders' colours
RGB, THEME = 2, 3  # a FullColorExt's xclrType
SOLID, UNCHANGED = 1, "pattern"  # an XF's fill pattern (fls): solid; a colour of a pattern fill, left as it is
# Office's default themes: their colours in SCHEME_SLOTS order, and their headings' and body's Latin fonts. 2013's
# and 2016's differ in their blues' places: accent 1 lighter (5B9BD5) and accent 5 darker (4472C4) in 2013's, the other
# way round in 2016's
OFFICE_2007_THEME, OFFICE_2013_THEME, OFFICE_2016_THEME = (Palette("Office", tuple(
    (colour, system) for colour, system in zip(colours.split(), ("windowText", "window") + ("",) * 10, strict=True)),
    False, fonts=(ThemeFont(heading, 0, family), None, ThemeFont("Calibri", 0, 0x22), None))
    for colours, heading, family in (
        ("000000 ffffff 1f497d eeece1 4f81bd c0504d 9bbb59 8064a2 4bacc6 f79646 0000ff 800080", "Cambria", 0x12),
        ("000000 ffffff 44546a e7e6e6 5b9bd5 ed7d31 a5a5a5 ffc000 4472c4 70ad47 0563c1 954f72", "Calibri Light", 0x22),
        ("000000 ffffff 44546a e7e6e6 4472c4 ed7d31 a5a5a5 ffc000 5b9bd5 70ad47 0563c1 954f72", "Calibri Light", 0x22)))
# THEME's dwThemeVersion ([MS-XLS] 2.4.326) where it names a default theme (0: the theme's package follows). The
# specification names 124226 alone; the later versions are those Excel 2013 and later write, each matched to its
# theme by the palette colours Excel chose for the accent colours of its built-in cell styles (docs/fidelity.md)
DEFAULT_THEMES = {124226: OFFICE_2007_THEME, 153222: OFFICE_2013_THEME, 164011: OFFICE_2013_THEME,
                  166925: OFFICE_2016_THEME}
# a theme colour's index in SpreadsheetML, as an XFEXT gives it: light 1 first, then dark 1, light 2, dark 2
THEME_ORDER = ("lt1", "dk1", "lt2", "dk2", "accent1", "accent2", "accent3", "accent4", "accent5", "accent6", "hlink",
               "folHlink")
LISTS = {"fonts": b"fontId", "fills": b"fillId", "borders": b"borderId"}  # a styles part's lists a cell style names
LISTED = {kind: re.compile(rb"<%s\b[^>]*>(.*?)</%s>" % ((kind.encode(),) * 2), re.S) for kind in LISTS}
CHILD = {kind: re.compile(rb"<%s\b[^>]*/>|<%s\b[^>]*>.*?</%s>" % ((kind[:-1].encode(),) * 3), re.S) for kind in LISTS}
XF_TAG = re.compile(rb"<xf\b[^>]*>")
CELL_XFS = re.compile(rb"<cellXfs\b[^>]*>(.*?)</cellXfs>", re.S)
COLOUR = {"font": re.compile(rb"<color\b[^>]*/>"), "fg": re.compile(rb"<fgColor\b[^>]*/>"),
          "bg": re.compile(rb"<bgColor\b[^>]*/>")}
RGB_OF = re.compile(rb'\brgb="[0-9A-Fa-f]{2}([0-9A-Fa-f]{6})"')
PATTERN = re.compile(rb'<patternFill\b[^>]*\bpatternType="(\w+)"')


@dataclass(frozen=True)
class Wanted:
    """The colours an XF gives its cells (RRGGBB, None where it gives none): its fill's foreground and background,
    its text's, and its borders' ((side, colour) each)."""
    fore: str | None = None
    back: str | None = None
    text: str | None = None
    sides: tuple[tuple[str, str], ...] = ()


@dataclass
class Listed:
    """A styles part's fonts, fills and borders (each element's bytes), each cell style's, and those added."""
    elements: dict[str, list[bytes]]
    of_xf: dict[str, list[int]]
    new: dict[str, list[bytes]] = field(default_factory=lambda: {kind: [] for kind in LISTS})


def mend(result: Path, source: Path, kind: str) -> int:
    """Give the cells of ``result`` (LibreOffice's export of the .xls ``source``) the fill and text colours their
    XFEXT records give. Returns how many cells changed (0: the file is untouched). Never raises for what the files
    hold."""
    if kind != "xls":
        return 0

    def parts(package: Package) -> Iterator[tuple[str, PartEdit]]:
        wanted = coloured_cells(source)
        styles_part = styles_part_of(package) if wanted else None
        if styles_part is None:
            return
        data = part_bytes(package, styles_part)
        styles, listed = Styles.of(data, styles_part), _listed(data, styles_part)
        for _, name, part in sheet_objects.worksheets(package):
            if name[:31] in wanted:
                yield part, _recolouring(wanted[name[:31]], styles, listed)
        yield styles_part, lambda data, name: (_written(styles.written(data, name), name, listed), 0)

    return edited(result, parts, "the colours of %s's cells stay as LibreOffice wrote them: %r", source)


def coloured_cells(source: Path) -> dict[str, dict[tuple[int, int], Wanted]]:
    """{sheet name (its first 31 characters): {(row, column): its XF's colours}} of each cell of the .xls ``source``
    whose XF has an XFEXT colour; {} where none has."""
    by_xf = xf_colours(source)
    return biff.cells_of(source, biff.CELLS | set(biff.MULTIPLE), by_xf)


def xf_colours(source: Path) -> dict[int, Wanted]:
    """{XF index: its colours} of the XFEXT records of the .xls ``source`` whose colours can be read."""
    extended = [_properties(data, body, end) for _, sheet, data, body, end in biff.records(source, {BIFF_XFEXT})
                if sheet is None and end - body >= 20]
    if not extended:
        return {}
    palette = workbook_theme(source)
    theme = None if palette is None else tuple(colour.upper() for colour, _ in palette.colours)
    found: dict[int, Wanted] = {}
    book = Book.of(source)
    for xf, properties in extended:
        colours = {kind: _rgb(*value, theme) for kind, value in properties.items()}
        named = _named(book, xf)  # what LibreOffice writes: the palette's colours the XF names
        fore, back, text = (colour if colour != shown and shown != UNCHANGED else None for colour, shown in zip(
            (colours.get(FILL_FORE), colours.get(FILL_BACK), colours.get(TEXT)), named[:3], strict=True))
        sides = tuple((side, colour) for kind, side in SIDES.items() if (colour := colours.get(kind)) is not None
                      and named[3].get(kind) not in (colour, UNCHANGED))
        wanted = Wanted(fore, back, text, sides)
        if wanted != Wanted():
            found[xf] = wanted
    return found


def workbook_theme(source: Path) -> Palette | None:
    """The colours of the theme of the .xls ``source``: its THEME record's package's, or the Office default theme
    the record names; None where it has none, names a default theme not known here, or its package does not read."""
    package, package_end = bytearray(), -1  # the theme's package, and where the record that holds its last bytes ends
    default = None
    for rec_type, sheet, data, body, end in biff.records(source, {BIFF_THEME, BIFF_CONTINUEFRT12}):
        if sheet is not None:
            continue
        if rec_type == BIFF_THEME and end - body >= 16:
            (version,) = struct.unpack_from("<I", data, body + 12)
            default = DEFAULT_THEMES.get(version)
            package[:], package_end = (data[body + 16:end], end) if version == 0 else (b"", -1)
        elif rec_type == BIFF_CONTINUEFRT12 and body - 4 == package_end:  # the package goes on right after it
            package += data[body + 12:end]
            package_end = end
    if package:
        return attempt(round_trip, bytes(package))  # a damaged package: None
    return default


def _named(book: Book, xf: int) -> tuple[str | None, str | None, str | None, dict[int, str | None]]:
    """The palette's colours (RRGGBB) that the XF ``xf`` of ``book`` names for its fill's foreground and background,
    its font and ({XFEXT type: colour}) each border it draws: what LibreOffice writes. None for a colour of the
    window's, automatic, or one it cannot name; a border it does not draw is not named."""
    if xf >= len(book.xfs):
        return None, None, None, {}
    (font,) = struct.unpack_from("<H", book.xfs[xf], 0)
    lines, more = struct.unpack_from("<II", book.xfs[xf], 10)
    (fill,) = struct.unpack_from("<H", book.xfs[xf], 18)  # icvFore, then icvBack, seven bits each
    text = book.fonts[font].colour if font < len(book.fonts) else -1
    drawn = {7: (lines >> 8 & 0x0F, more & 0x7F), 8: (lines >> 12 & 0x0F, more >> 7 & 0x7F),
             9: (lines & 0x0F, lines >> 16 & 0x7F), 10: (lines >> 4 & 0x0F, lines >> 23 & 0x7F)}
    borders = {kind: _palette(book, colour) for kind, (line, colour) in drawn.items() if line}
    borders.update({kind: UNCHANGED for kind, (line, _) in drawn.items() if not line})
    if more >> 26 != SOLID:  # LibreOffice draws a pattern as a solid fill of its colours mixed: it stays so
        return UNCHANGED, UNCHANGED, _palette(book, text), borders
    return _palette(book, fill & 0x7F), _palette(book, fill >> 7 & 0x7F), _palette(book, text), borders


def _palette(book: Book, index: int) -> str | None:
    if not 0 <= index < len(book.colours):
        return None
    red, green, blue = book.colours[index][:3]
    return f"{red:02X}{green:02X}{blue:02X}"


def _properties(data: bytes, body: int, end: int) -> tuple[int, dict[int, tuple[int, int, int]]]:
    """(the XF, {property type: (xclrType, nTintShade, xclrValue)} of its colours) of an XFEXT record."""
    xf, _, count = struct.unpack_from("<HHH", data, body + 14)
    found: dict[int, tuple[int, int, int]] = {}
    at = body + 20
    for _ in range(count):
        if at + 4 > end:
            break
        kind, size = struct.unpack_from("<HH", data, at)
        if (kind in (FILL_FORE, FILL_BACK, TEXT) or kind in SIDES) and size >= 12 and at + 12 <= end:
            found[kind] = struct.unpack_from("<HhI", data, at + 4)
        at += max(size, 4)
    return xf, found


def _rgb(kind: int, tint: int, value: int, theme: tuple[str, ...] | None) -> str | None:
    """The RRGGBB of a FullColorExt: an RGB (its bytes red, green, blue), or a theme colour with its tint."""
    if kind == RGB:
        base = f"{value & 0xFF:02X}{value >> 8 & 0xFF:02X}{value >> 16 & 0xFF:02X}"
    elif kind == THEME and theme is not None and value < len(THEME_ORDER):
        base = theme[SCHEME_SLOTS.index(THEME_ORDER[value])].upper()
    else:
        return None
    return tinted(base, tint / 32767) if tint else base


def tinted(colour: str, tint: float) -> str:
    """``colour`` (RRGGBB) lighter (``tint`` > 0) or darker (< 0) by ``tint``, as SpreadsheetML's tint works on the
    colour's HLS lightness."""
    red, green, blue = (int(colour[at:at + 2], 16) / 255 for at in (0, 2, 4))
    hue, light, saturation = colorsys.rgb_to_hls(red, green, blue)
    light = light * (1 + tint) if tint < 0 else light * (1 - tint) + tint
    return "".join(f"{round(channel * 255):02X}" for channel in colorsys.hls_to_rgb(hue, light, saturation))


def _listed(data: bytes, name: str) -> Listed:
    """The fonts, fills and borders of the styles part ``data``, and each cell style's."""
    elements = {}
    for kind, pattern in LISTED.items():
        found = pattern.search(data)
        if found is None:
            raise Unreadable(f"{name} has no {kind}")
        elements[kind] = CHILD[kind].findall(found.group(1))
    xfs = CELL_XFS.search(data)
    if xfs is None:
        raise Unreadable(f"{name} has no cellXfs")
    tags = XF_TAG.findall(xfs.group(1))
    return Listed(elements, {kind: [_attribute(tag, key) for tag in tags] for kind, key in LISTS.items()})


def _attribute(tag: bytes, key: bytes) -> int:
    found = re.search(rb"\b" + key + rb'="([0-9]+)"', tag)
    return int(found.group(1)) if found else 0


def _recolouring(cells: dict[tuple[int, int], Wanted], styles: Styles, listed: Listed) -> PartEdit:
    """The edit of a worksheet part that gives each of its ``cells`` a copy of its style in its colours."""
    def edit(data: bytes, name: str) -> tuple[bytes, int]:
        edits = restyled_by(data, name, cells, lambda style, wanted: _copy(style, wanted, styles, listed))
        return spliced(data, edits), len(edits)
    return edit


def _copy(style: int, wanted: Wanted, styles: Styles, listed: Listed) -> int | None:
    """The index of the copy of cell style ``style`` in the colours ``wanted``; None where it shows them already."""
    if style >= len(listed.of_xf["fonts"]):
        return None
    font, fill, border = (_element(listed, kind, listed.of_xf[kind][style]) for kind in LISTS)
    copied: dict[str, bytes] = {}
    if font is not None and wanted.text and _shown(font, COLOUR["font"]) != wanted.text:
        copied["fonts"] = _coloured(font, "color", wanted.text)
    pattern = PATTERN.search(fill) if fill is not None else None
    if fill is not None and pattern is not None:
        recoloured = fill
        if wanted.fore and _shown(fill, COLOUR["fg"]) != wanted.fore:
            recoloured = _coloured(recoloured, "fgColor", wanted.fore)
        if wanted.back and pattern.group(1) != b"solid" and _shown(fill, COLOUR["bg"]) != wanted.back:
            recoloured = _coloured(recoloured, "bgColor", wanted.back)
        if recoloured != fill:
            copied["fills"] = recoloured
    if border is not None and wanted.sides:
        recoloured = border
        for side, colour in wanted.sides:
            found = re.search(rb"<%s\b[^>]*>(.*?)</%s>" % (side.encode(), side.encode()), recoloured, re.S)
            if found is not None and _shown(found.group(1), COLOUR["font"]) != colour:
                inner = _coloured(found.group(1), "color", colour)
                recoloured = recoloured[:found.start(1)] + inner + recoloured[found.end(1):]
        if recoloured != border:
            copied["borders"] = recoloured
    attributes: dict[str, str] = {}
    for kind, element in copied.items():
        attributes[LISTS[kind].decode()] = str(_added(listed, kind, element))
        attributes[{"fonts": "applyFont", "fills": "applyFill", "borders": "applyBorder"}[kind]] = "true"
    return styles.with_attributes(style, attributes) if attributes else None


def _element(listed: Listed, kind: str, index: int) -> bytes | None:
    own = listed.elements[kind]
    return own[index] if index < len(own) else None


def _shown(element: bytes, colour: re.Pattern[bytes]) -> str | None:
    """The RRGGBB of the colour element ``colour`` finds in a font, a fill or a border's side, None where it names
    none by RGB."""
    found = colour.search(element)
    rgb = RGB_OF.search(found.group()) if found else None
    return rgb.group(1).decode().upper() if rgb else None


def _coloured(element: bytes, tag: str, colour: str) -> bytes:
    """A font, a fill or a border's side (``element``) with its colour element ``tag`` the RGB ``colour``: in its
    place, or first in a font or a side, last in a fill's pattern."""
    written = f'<{tag} rgb="FF{colour}"/>'.encode()
    found = re.search(rb"<%s\b[^>]*/>" % tag.encode(), element)
    if found is not None:
        return element[:found.start()] + written + element[found.end():]
    if tag == "color" and element.startswith(b"<font"):
        return re.sub(rb"^<font\b[^>]*?(/?)>", lambda start: start.group()[:-2] + b">" + written + b"</font>"
                      if start.group(1) else start.group() + written, element, count=1)
    if tag == "color":
        return written + element
    return element.replace(b"</patternFill>", written + b"</patternFill>", 1)


def _added(listed: Listed, kind: str, element: bytes) -> int:
    """The index of ``element`` among the part's fonts, fills or borders, added where it is not one of them."""
    own, new = listed.elements[kind], listed.new[kind]
    if element in own:
        return own.index(element)
    if element not in new:
        new.append(element)
    return len(own) + new.index(element)


def _written(data: bytes, name: str, listed: Listed) -> bytes:
    """The styles part ``data`` with the fonts, fills and borders added (as it was where none are)."""
    edits = []
    for kind, pattern in LISTED.items():
        added = listed.new[kind]
        found = pattern.search(data)
        if not added or found is None:
            continue
        edits += Styles._counted(data, name, (found.start(), found.end(1)), len(listed.elements[kind]) + len(added),
                                 b"".join(added))
    return spliced(data, edits)

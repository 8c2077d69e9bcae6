"""Cell styles made for a workbook's styles part from an .xls's XF records, for formats no cell of the result has.

A mend that puts a format back where LibreOffice dropped it (a row's own format, ``sheet_rows``) first looks for the
cell style LibreOffice wrote for a cell of the same XF. An XF that no cell of the workbook has is written by nobody;
``Made.style`` writes it here: its font, fill, border, number format, alignment and protection, as the workbook's XF,
FONT, FORMAT and PALETTE records give them ([MS-XLS] 2.4.353, 2.4.122, 2.4.126, 2.4.188; the colours of a workbook
without a PALETTE are Excel's own, as xlrd lists them), each added to its list in ``styles.xml``.
"""

import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from xlrd.formatting import excel_default_palette_b8

from docshift.engine import biff, ooxml
from docshift.engine.embedding import spliced
from docshift.engine.inventory.common import biff_string
from docshift.engine.inventory.package import NS_S, SEP
from docshift.engine.sheet_numbers import FIRST_CUSTOM, Styles
from docshift.errors import ResultUnreadable as Unreadable

# BIFF's line styles and fill patterns are OOXML's, in the same order ([MS-XLS] 2.5.50, 2.5.92; ST_BorderStyle,
# ST_PatternType)
LINES = ("none", "thin", "medium", "dashed", "dotted", "thick", "double", "hair", "mediumDashed", "dashDot",
         "mediumDashDot", "dashDotDot", "mediumDashDotDot", "slantDashDot")
PATTERNS = ("none", "solid", "mediumGray", "darkGray", "lightGray", "darkHorizontal", "darkVertical", "darkDown",
            "darkUp", "darkGrid", "darkTrellis", "lightHorizontal", "lightVertical", "lightDown", "lightUp",
            "lightGrid", "lightTrellis", "gray125", "gray0625")
HORIZONTAL = ("general", "left", "center", "right", "fill", "justify", "centerContinuous", "distributed")
VERTICAL = ("top", "center", "bottom", "justify", "distributed")
UNDERLINES = {1: "single", 2: "double", 0x21: "singleAccounting", 0x22: "doubleAccounting"}
SCRIPTS = {1: "superscript", 2: "subscript"}
# what XML 1.0 does not allow in a document (a FONT record's name padded with NULs, a damaged FORMAT record's code)
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
BUILT_IN = {*range(23), *range(37, 41), *range(45, 50)}  # the number formats ECMA-376 gives (18.8.30)
SYSTEM = {64: 64, 65: 65, 0x7FFF: 64}  # the window's text and background colours, OOXML's indexed 64 and 65
LISTS = ("numFmts", "fonts", "fills", "borders", "cellXfs")
STYLE_SHEET = f"{NS_S}{SEP}styleSheet"
BIFF_XF, BIFF_FONT, BIFF_FORMAT, BIFF_PALETTE = 0x00E0, 0x0031, 0x041E, 0x0092
# the first eight colours of every palette, then Excel's 56 of a workbook without a PALETTE record
COLOURS = ((0, 0, 0), (255, 255, 255), (255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (255, 0, 255),
           (0, 255, 255), *excel_default_palette_b8)


class Font(NamedTuple):
    """What a FONT record gives a cell's text."""
    height: int  # twips
    italic: bool
    struck: bool
    colour: int
    bold: bool
    script: int
    underline: int
    family: int
    charset: int
    name: str


@dataclass
class Book:
    """The records of an .xls's globals that a cell's format is made of: each XF's body, the fonts (in the order
    an XF counts them), the custom number formats' codes and the palette."""
    xfs: list[bytes] = field(default_factory=list)
    fonts: list[Font] = field(default_factory=list)
    codes: dict[int, str] = field(default_factory=dict)
    colours: list[tuple[int, ...]] = field(default_factory=lambda: list(COLOURS))

    @classmethod
    def of(cls, source: Path) -> "Book":
        book = cls()
        for rec_type, sheet, data, body, end in biff.records(source, {BIFF_XF, BIFF_FONT, BIFF_FORMAT,
                                                                       BIFF_PALETTE}):
            if sheet is not None:
                continue
            if rec_type == BIFF_XF and end - body >= 20:
                book.xfs.append(bytes(data[body:body + 20]))
            elif rec_type == BIFF_FONT and end - body >= 15:
                height, flags, colour, weight, script, underline, family, charset = struct.unpack_from(
                    "<HHHHHBBB", data, body)
                book.fonts.append(Font(height, bool(flags & 0x02), bool(flags & 0x08), colour, weight >= 700, script,
                                       underline, family, charset, biff_string(data, body + 14, end, True, "cp1252")))
                if len(book.fonts) == 4:  # an XF's font 4 is none: its fifth FONT record is its font 5
                    book.fonts.append(book.fonts[0])
            elif rec_type == BIFF_FORMAT and end - body >= 5:
                book.codes[struct.unpack_from("<H", data, body)[0]] = biff_string(data, body + 2, end, True, "", 2)
            elif rec_type == BIFF_PALETTE and end - body >= 2:
                count = min(struct.unpack_from("<H", data, body)[0], (end - body - 2) // 4, 56)
                book.colours[8:8 + count] = [tuple(data[at:at + 3]) for at in range(body + 2, body + 2 + 4 * count, 4)]
        return book


@dataclass
class Made:
    """The styles part of a result, what it lists, and the cell styles added to it."""
    data: bytes
    name: str
    book: Book
    lists: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # where each list starts, ends, its count
    codes: dict[str, int] = field(default_factory=dict)  # each number format's code: its number
    added: dict[str, list[str]] = field(default_factory=lambda: {local: [] for local in LISTS})
    made: dict[int, str] = field(default_factory=dict)  # XF: the cell style made of it
    sheet_end: int = -1  # where the styleSheet's start tag ends

    @classmethod
    def of(cls, data: bytes, name: str, book: Book) -> "Made":
        """What ``styles.xml`` (``data``) lists, to make styles of the .xls's records ``book`` (``Book.of``)."""
        made, depth = cls(data, name, book), [0]
        open_at: dict[str, list[int]] = {}

        def start(tag: str, attributes: dict[str, str]) -> None:
            depth[0] += 1
            local = tag.rpartition(SEP)[2]
            if tag == STYLE_SHEET and depth[0] == 1:
                qualified, tag_end, _ = ooxml.start_tag(data, reader.CurrentByteIndex, name)
                if b":" in qualified or tag_end.group().endswith(b"/>"):
                    raise Unreadable(f"{name}: a styleSheet LibreOffice does not write")
                made.sheet_end = tag_end.end()
            elif depth[0] == 2 and local in LISTS:
                open_at[local] = [reader.CurrentByteIndex, 0]
            elif depth[0] == 3 and local in ("numFmt", "font", "fill", "border", "xf") and open_at:
                listed = next(reversed(open_at))
                open_at[listed][1] += 1
                if local == "numFmt" and attributes.get("numFmtId", "").isdigit():
                    made.codes[attributes.get("formatCode", "")] = int(attributes["numFmtId"])

        def end(tag: str) -> None:
            local = tag.rpartition(SEP)[2]
            if depth[0] == 2 and local in open_at and local not in made.lists:
                at, count = open_at[local]
                made.lists[local] = (at, reader.CurrentByteIndex, count)
            depth[0] -= 1

        reader = ooxml.parser(name, Unreadable, start, end)
        ooxml.feed(reader, (data,), name, Unreadable)
        if made.sheet_end < 0 or any(local not in made.lists for local in LISTS[1:]):
            raise Unreadable(f"{name} lacks a list of styles")
        return made

    def style(self, xf_index: int) -> str | None:
        """The index of a cell style made of the .xls's XF ``xf_index`` (None where it has none)."""
        if xf_index in self.made:
            return self.made[xf_index]
        if not 0 <= xf_index < len(self.book.xfs):
            return None
        font, number, flags, align, rotation, indent, _, lines, more, pattern = struct.unpack_from(
            "<HHHBBBBIIH", self.book.xfs[xf_index])
        ids = {"numFmtId": self._number(number),
               "fontId": self._add("fonts", self._font(self.book.fonts[font])) if font < len(self.book.fonts) else 0,
               "fillId": self._add("fills", self._fill(more >> 26, pattern & 0x7F, (pattern >> 7) & 0x7F)),
               "borderId": self._add("borders", self._border(lines, more))}
        vertical = (align >> 4) & 0x07
        aligned = {"horizontal": HORIZONTAL[align & 0x07], "vertical": VERTICAL[vertical] if vertical < 5 else "",
                   "textRotation": rotation if rotation <= 180 or rotation == 255 else 0,  # 255: stacked
                   "wrapText": (align >> 3) & 1, "indent": indent & 0x0F, "shrinkToFit": (indent >> 4) & 1}
        written = " ".join(f'{key}="{value}"' for key, value in aligned.items()
                           if value and value not in ("general", "bottom"))
        self.added["cellXfs"].append(
            "<xf " + " ".join(f'{key}="{value}"' for key, value in ids.items()) + ' xfId="0" applyNumberFormat="1"'
            ' applyFont="1" applyFill="1" applyBorder="1" applyAlignment="1" applyProtection="1">'
            f'<alignment {written}/><protection locked="{flags & 1}" hidden="{(flags >> 1) & 1}"/></xf>')
        self.made[xf_index] = str(self.lists["cellXfs"][2] + len(self.added["cellXfs"]) - 1)
        return self.made[xf_index]

    def written(self) -> bytes:
        """The styles part with the styles made (as it was where none are)."""
        if not self.made:
            return self.data
        edits: list[tuple[int, int, bytes]] = []
        for local, children in self.added.items():
            if not children:
                continue
            if local in self.lists:
                at, end, count = self.lists[local]
                edits += Styles._counted(self.data, self.name, (at, end), count + len(children),
                                         "".join(children).encode())
            else:  # numFmts, the styleSheet's first child
                edits.append((self.sheet_end, self.sheet_end, f'<numFmts count="{len(children)}">'
                              f'{"".join(children)}</numFmts>'.encode()))
        return spliced(self.data, edits)

    def edit(self, _data: bytes, _name: str) -> tuple[bytes, int]:
        """The edit of the styles part that the cell styles were made for (``embedding.PartEdit``)."""
        return self.written(), 0

    def _add(self, local: str, element: str) -> int:
        self.added[local].append(element)
        return self.lists[local][2] + len(self.added[local]) - 1

    def _number(self, key: int) -> int:
        """The number of the number format ``key`` of the .xls: its FORMAT record's code, added (Excel writes one for
        some built-in formats too, in its locale), else the built-in one OOXML defines, else General."""
        code = xml_text(self.book.codes.get(key, ""))
        if not code:
            return key if key in BUILT_IN and key not in self.book.codes else 0
        if code not in self.codes:
            self.codes[code] = max([FIRST_CUSTOM - 1, *self.codes.values()]) + 1
            self.added["numFmts"].append(f'<numFmt numFmtId="{self.codes[code]}" '
                                         f'formatCode="{ooxml.attribute_value(code)}"/>')
        return self.codes[code]

    def _colour(self, tag: str, index: int) -> str:
        if index in SYSTEM:
            return f'<{tag} indexed="{SYSTEM[index]}"/>'
        if index < len(self.book.colours):
            return f'<{tag} rgb="FF{bytes(self.book.colours[index]).hex().upper()}"/>'
        return f'<{tag} indexed="{SYSTEM[0x7FFF]}"/>'

    def _font(self, font: Font) -> str:
        parts = ["<b/>" if font.bold else "", "<i/>" if font.italic else "", "<strike/>" if font.struck else "",
                 f'<u val="{UNDERLINES[font.underline]}"/>' if font.underline in UNDERLINES else "",
                 f'<vertAlign val="{SCRIPTS[font.script]}"/>' if font.script in SCRIPTS else "",
                 f'<sz val="{font.height / 20:g}"/>' if 20 <= font.height <= 8180 else "",  # 1-409 points
                 self._colour("color", font.colour),
                 f'<name val="{ooxml.attribute_value(name)}"/>' if (name := xml_text(font.name).strip()) else "",
                 f'<family val="{font.family}"/>' if 0 < font.family < 6 else "",
                 f'<charset val="{font.charset}"/>' if font.charset else ""]
        return "<font>" + "".join(parts) + "</font>"

    def _fill(self, kind: int, fore: int, back: int) -> str:
        pattern = PATTERNS[kind] if kind < len(PATTERNS) else "none"
        if pattern == "none":
            return '<fill><patternFill patternType="none"/></fill>'
        return (f'<fill><patternFill patternType="{pattern}">{self._colour("fgColor", fore)}'
                f'{self._colour("bgColor", back)}</patternFill></fill>')

    def _border(self, lines: int, more: int) -> str:
        """A border of an XF's two words of lines (left, right, top and bottom styles; left and right colours;
        which diagonals) and more (top, bottom and diagonal colours; the diagonal's style)."""
        def side(tag: str, line: int, colour: int) -> str:
            if not 0 < line < len(LINES):
                return f"<{tag}/>"
            return f'<{tag} style="{LINES[line]}">{self._colour("color", colour)}</{tag}>'

        down, up = (lines >> 30) & 1, (lines >> 31) & 1
        diagonal = (' diagonalUp="1"' if up else "") + (' diagonalDown="1"' if down else "")
        return (f"<border{diagonal}>" + side("left", lines & 0x0F, (lines >> 16) & 0x7F) +
                side("right", (lines >> 4) & 0x0F, (lines >> 23) & 0x7F) +
                side("top", (lines >> 8) & 0x0F, more & 0x7F) +
                side("bottom", (lines >> 12) & 0x0F, (more >> 7) & 0x7F) +
                side("diagonal", (more >> 21) & 0x0F if up or down else 0, (more >> 14) & 0x7F) + "</border>")


def xml_text(text: str) -> str:
    """``text`` without the characters XML 1.0 does not allow."""
    return NOT_XML.sub("", text)

"""Number formats that LibreOffice's import of an .xls sets to General, put back into the .xlsx.

An .xls gives each cell an XF record, and the XF its number format: a built-in one, or a FORMAT record's code. A
cell's XF whose number format is its style's (fAtrNum clear) takes the style's. LibreOffice's import loses the format
in two cases, and its export then writes General, so that Excel shows a time as the serial 40293.7378, an amount
without its currency and a fraction as a decimal:

- a cell XF that takes its format from a built-in style (Currency, Comma) and sets nothing else of its own;
- a code its number formatter refuses: a time of the system's format (``[$-F400]h:mm:ss AM/PM``) followed by a
  section that shows zero as nothing, a fraction of nine-digit denominators (``# ??/?????????``).

And where it keeps a format that Excel shows in its reader's locale (a built-in short date, 14, or time, 20-21), its
export writes the US code of its own locale in its place (``[$-409]m/d/yyyy``, ``US_CODES``): a date that an .xls
shows as 28/03/1964 in a British Excel and as 28.03.1964 in a German one shows 3/28/1964 in both, and a month's name
in English. Of the workbooks of the corpus, POI's tests and unseen sets 25-29, 95 hold 64,417 cells of such formats.

Of 685 workbooks of the corpus and POI's and LibreOffice's tests, 3 lost so the formats of 5,873 cells; the others
kept all 509,737 of theirs.

``mend`` reads each cell's XF from the NUMBER, RK, MULRK and FORMULA records of a BIFF8 workbook and the format it
takes, and gives each number cell of the result that LibreOffice left General while the .xls has a format of its
own a copy of its cell style with that format (the FORMAT record's code, or the built-in format's number), and so
each cell whose .xls format is such a built-in one and whose style has LibreOffice's US code for it. Every other
cell, and every other byte, stays as LibreOffice wrote it.
"""

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from docshift.engine import biff, ooxml, sheet_objects
from docshift.engine.embedding import PartEdit, edited, part_bytes, spliced
from docshift.engine.inventory.common import biff_string
from docshift.engine.inventory.package import NS_S, SEP, Package
from docshift.engine.sheet_objects import COLUMN_NUMBERS, cell_place
from docshift.errors import ResultUnreadable as Unreadable

BIFF_FORMAT, BIFF_XF = 0x041E, 0x00E0
BIFF_NUMBER, BIFF_RK, BIFF_MULRK, BIFF_FORMULA = 0x0203, 0x027E, 0x00BD, 0x0006
NUMBER_CELLS = {BIFF_NUMBER, BIFF_RK, BIFF_MULRK, BIFF_FORMULA}  # the records of a cell that holds a number
STYLE_XF, NUMBER_USED = 0x0004, 0x04  # an XF's fStyle (its third and fourth bytes), fAtrNum (its tenth byte)
FIRST_CUSTOM = 164  # the first number format of a workbook's own; those below are Excel's built-in ones
STYLES = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles"
CELL, CELL_XFS, NUM_FMTS, NUM_FMT, XF, STYLE_SHEET, ALIGNMENT = (f"{NS_S}{SEP}{local}" for local in (
    "c", "cellXfs", "numFmts", "numFmt", "xf", "styleSheet", "alignment"))
Format = int | str  # a built-in format's number, or a FORMAT record's code
# the codes LibreOffice 25.2 writes (its locale en-US) for Excel's built-in dates, times and numbers that Excel shows
# in its reader's locale (ECMA-376 18.8.30; the East Asian ones, 27-36, LibreOffice writes as 14's and 21's)
US_CODES = {14: "[$-409]m/d/yyyy", 15: "[$-409]d\\-mmm\\-yy", 16: "[$-409]d\\-mmm", 17: "[$-409]mmm\\-yy",
            18: "[$-409]h:mm\\ AM/PM", 19: "[$-409]h:mm:ss\\ AM/PM", 20: "[$-409]h:mm", 21: "[$-409]h:mm:ss",
            22: "[$-409]m/d/yyyy\\ h:mm", 37: "[$-409]#,##0_);\\(#,##0\\)", 38: "[$-409]#,##0_);[RED]\\(#,##0\\)",
            39: "[$-409]#,##0.00_);\\(#,##0.00\\)", 40: "[$-409]#,##0.00_);[RED]\\(#,##0.00\\)"}
BUILT_IN_OF = {code: number for number, code in US_CODES.items()}


def mend(result: Path, source: Path, kind: str) -> int:
    """Give each number cell of ``result`` (LibreOffice's export of the .xls ``source``) that LibreOffice left
    General the number format the .xls gives it. Returns how many cells were given one (0: the file is untouched).
    Never raises for what the files hold."""
    if kind != "xls":
        return 0

    def parts(package: Package) -> Iterator[tuple[str, PartEdit]]:
        styles_part = styles_part_of(package)
        if styles_part is None:
            return
        styles = Styles.of(part_bytes(package, styles_part), styles_part)
        replaceable = styles.replaceable()
        # the built-in formats LibreOffice wrote as US codes are put back on every cell, a blank, a text or an error
        # one too; the formats set to General, on number cells
        every_cell = any(number is not None for number in replaceable.values())
        wanted = formats_of(source, biff.CELLS | set(biff.MULTIPLE) if every_cell else NUMBER_CELLS) \
            if replaceable else {}
        for _, name, part in sheet_objects.worksheets(package):
            if wanted.get(name[:31]):
                yield part, _restyling(wanted[name[:31]], replaceable, styles)
        yield styles_part, lambda data, name: (styles.written(data, name), 0)

    return edited(result, parts, "the number formats of %s stay as LibreOffice wrote them: %r", source)


def styles_part_of(package: Package) -> str | None:
    """The name of the workbook ``package``'s styles part, None where it has none."""
    return next((target for rel_type, target in package.relationships("xl/workbook.xml").values()
                 if rel_type == STYLES and target in package.names), None)


def formats_of(source: Path, kinds: set[int] = NUMBER_CELLS) -> dict[str, dict[tuple[int, int], Format]]:
    """{sheet name: {(row, column): its number format}} of each cell of ``kinds`` (a number or formula cell's
    records, or those of every cell) of the .xls ``source`` (BIFF8) whose XF's format is not General; {} where no XF
    has one."""
    codes: dict[int, str] = {}
    xfs: list[tuple[int, int, bool]] = []  # each XF's format, parent style and whether it sets its own format
    for rec_type, sheet, data, body, end in biff.records(source, {BIFF_FORMAT, BIFF_XF}):
        if sheet is not None:
            continue
        if rec_type == BIFF_FORMAT and end - body >= 5:
            codes[struct.unpack_from("<H", data, body)[0]] = biff_string(data, body + 2, end, True, "", 2)
        elif rec_type == BIFF_XF and end - body >= 20:
            number, kind = struct.unpack_from("<HH", data, body + 2)
            xfs.append((number, kind >> 4, bool(kind & STYLE_XF or data[body + 9] & NUMBER_USED)))
    return biff.cells_of(source, kinds, _shown(xfs, codes))


def _shown(xfs: list[tuple[int, int, bool]], codes: dict[int, str]) -> dict[int, Format]:
    """{XF index: the format a cell of it shows} of each XF whose format is not General: its own, or its style's
    where it takes the style's. A custom format without its FORMAT record is left out."""
    shown: dict[int, Format] = {}
    for index, (number, parent, own) in enumerate(xfs):
        if not own and parent < len(xfs):
            number = xfs[parent][0]
        if number == 0 or codes.get(number, "").lower() == "general":
            continue
        if number in codes:
            shown[index] = codes[number]
        elif number < FIRST_CUSTOM:
            shown[index] = number
    return shown


def _restyling(wanted: dict[tuple[int, int], Format], replaceable: dict[int, int | None],
               styles: "Styles") -> PartEdit:
    """The edit of a worksheet part whose cells ``wanted`` names ({(row, column): format}) get their formats where
    their style shows General or LibreOffice's code for the built-in format wanted (``replaceable``: {style: None,
    or that built-in format}), each a style of ``styles`` made for it."""
    def edit(data: bytes, name: str) -> tuple[bytes, int]:
        if not _any_wanted(data, wanted, replaceable):
            return data, 0
        given = 0

        def restyle(tag: str, attributes: dict[str, str]) -> dict[str, str] | None:
            nonlocal given
            if tag != CELL:
                return None
            written = attributes.get("s", "0")
            style = int(written) if written.isdigit() else -1
            place = cell_place(attributes.get("r", "")) if style in replaceable else None
            number = wanted.get(place) if place is not None else None
            if number is None or replaceable[style] not in (None, number) or \
                    (replaceable[style] is None and attributes.get("t", "n") != "n"):
                return None
            given += 1
            return {"s": str(styles.with_format(style, number))}

        return ooxml.edit_tags(data, name, restyle), given
    return edit


def _any_wanted(data: bytes, wanted: dict[tuple[int, int], Format], replaceable: dict[int, int | None]) -> bool:
    """Whether a cell of the worksheet part ``data`` that ``wanted`` names has a style of ``replaceable``, as
    LibreOffice writes a cell's start tag (``<c r="B2" s="3" t="n">``): a look at the bytes that spares reading the
    part where no cell is to change. It finds no cell written otherwise, and then the part stays as it is."""
    styles = b"|".join(b"%d" % style for style in sorted(replaceable))
    found = re.finditer(rb'<c r="([A-Z]{1,3})([0-9]{1,7})" s="(?:' + styles + rb')"(?: t="[a-zA-Z]+")?/?>', data)
    return any((int(row) - 1, COLUMN_NUMBERS.get(letters.decode(), -1)) in wanted for letters, row in
               (match.groups() for match in found))


@dataclass
class Styles:
    """What the mend reads of a workbook's styles part and the styles it adds: the custom number formats, each cell
    style's format and where its element is, where cellXfs and numFmts are."""
    codes: dict[int, str] = field(default_factory=dict)
    formats: list[int] = field(default_factory=list)
    xfs: list[tuple[int, int]] = field(default_factory=list)  # where each cell style's element starts and ends
    quoted: set[int] = field(default_factory=set)  # the cell styles with the "keep as text" prefix (quotePrefix)
    aligned: dict[int, tuple[int, str]] = field(default_factory=dict)  # a cell style's alignment: where its element
    # starts, and its horizontal alignment
    cell_xfs: tuple[int, int] = (-1, -1)  # where cellXfs's start tag is, and its end tag
    num_fmts: tuple[int, int] = (-1, -1)
    sheet_start: int = -1
    added: dict[tuple[int, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]], int] = field(
        default_factory=dict)  # (cell style, what its copy's tag says otherwise, and its alignment's): the copy's index
    new_codes: dict[str, int] = field(default_factory=dict)  # a code added: its number

    @classmethod
    def of(cls, data: bytes, name: str) -> "Styles":
        styles, inside, inside_at = cls(), [""], [-1]  # the numFmts or cellXfs being read, where its start tag is

        def start(tag: str, attributes: dict[str, str]) -> None:
            at = reader.CurrentByteIndex
            if tag == STYLE_SHEET:
                styles.sheet_start = at
            elif tag in (CELL_XFS, NUM_FMTS) and not inside[0]:
                inside[0], inside_at[0] = tag, at
            elif tag == NUM_FMT and inside[0] == NUM_FMTS and attributes.get("numFmtId", "").isdigit():
                styles.codes[int(attributes["numFmtId"])] = attributes.get("formatCode", "")
            elif tag == XF and inside[0] == CELL_XFS:
                number = attributes.get("numFmtId", "0")
                if attributes.get("quotePrefix") in ("1", "true"):
                    styles.quoted.add(len(styles.formats))
                styles.formats.append(int(number) if number.isdigit() else -1)
                styles.xfs.append((at, at))
            elif tag == ALIGNMENT and inside[0] == CELL_XFS and styles.formats:
                styles.aligned[len(styles.formats) - 1] = (at, attributes.get("horizontal", "general"))

        def end(tag: str) -> None:
            at = reader.CurrentByteIndex
            if tag == XF and inside[0] == CELL_XFS:
                styles.xfs[-1] = (styles.xfs[-1][0], ooxml.element_end(data, styles.xfs[-1][0], at, name))
            elif tag == inside[0]:
                if tag == CELL_XFS:
                    styles.cell_xfs = (inside_at[0], at)
                else:
                    styles.num_fmts = (inside_at[0], at)
                inside[0] = ""

        reader = ooxml.parser(name, Unreadable, start, end)
        ooxml.feed(reader, (data,), name, Unreadable)
        if styles.sheet_start < 0 or styles.cell_xfs[0] < 0:
            raise Unreadable(f"{name} has no cellXfs")
        return styles

    def replaceable(self) -> dict[int, int | None]:
        """{cell style: None} of each that shows General, and {cell style: a built-in format} of each whose format
        is LibreOffice's US code for that built-in one (``US_CODES``)."""
        found: dict[int, int | None] = {}
        for index, number in enumerate(self.formats):
            code = self.codes.get(number, "")
            if number == 0 or code.lower() == "general":
                found[index] = None
            elif code in BUILT_IN_OF:
                found[index] = BUILT_IN_OF[code]
        return found

    def with_format(self, style: int, number: Format) -> int:
        """The index of the cell style that is ``style`` with the number format ``number``, added if need be."""
        if isinstance(number, str) and number not in self.new_codes:
            self.new_codes[number] = max([FIRST_CUSTOM - 1, *self.codes, *self.new_codes.values()]) + 1
        return self.with_attributes(style, {
            "numFmtId": str(self.new_codes[number] if isinstance(number, str) else number),
            "applyNumberFormat": "true"})

    def with_attributes(self, style: int, attributes: dict[str, str], alignment: dict[str, str] | None = None) -> int:
        """The index of the cell style that is ``style`` with its tag's ``attributes`` set so, and its alignment
        element's ``alignment`` (where ``aligned`` has one), added if need be."""
        key = (style, tuple(sorted(attributes.items())), tuple(sorted((alignment or {}).items())))
        if key not in self.added:
            self.added[key] = len(self.formats) + len(self.added)
        return self.added[key]

    def written(self, data: bytes, name: str) -> bytes:
        """The styles part ``data`` with the styles and the number formats added (as it was where none are)."""
        if not self.added:
            return data
        edits: list[tuple[int, int, bytes]] = []  # (from, to, the bytes there), in the part's order
        if self.new_codes:
            prefix = ooxml.prefix(data, self.sheet_start, name)
            formats = b"".join(f'<{prefix}numFmt numFmtId="{number}" formatCode="{ooxml.attribute_value(code)}"/>'
                               .encode() for code, number in self.new_codes.items())
            if self.num_fmts[0] < 0:
                at = ooxml.start_tag(data, self.sheet_start, name)[1].end()
                edits.append((at, at, f'<{prefix}numFmts count="{len(self.new_codes)}">'.encode() + formats +
                              f"</{prefix}numFmts>".encode()))
            else:
                edits += self._counted(data, name, self.num_fmts, len(self.codes) + len(self.new_codes), formats)
        made = []
        for (style, attributes, alignment), _ in sorted(self.added.items(), key=lambda item: item[1]):
            start, end = self.xfs[style]
            tag, tag_end = ooxml.retagged(data, start, name, dict(attributes))
            if alignment and style in self.aligned:
                at = self.aligned[style][0]
                aligned, aligned_end = ooxml.retagged(data, at, name, dict(alignment))
                made.append(tag + data[tag_end:at] + aligned + data[aligned_end:end])
            else:
                made.append(tag + data[tag_end:end])
        edits += self._counted(data, name, self.cell_xfs, len(self.formats) + len(self.added), b"".join(made))
        return spliced(data, edits)

    @staticmethod
    def _counted(data: bytes, name: str, element: tuple[int, int], count: int,
                 children: bytes) -> list[tuple[int, int, bytes]]:
        """The edits that give ``element`` (where its start and end tags are) the count ``count`` and ``children``
        at its end. An element written empty (``<numFmts/>``) is not one LibreOffice writes, and is refused."""
        start, end = element
        tag, tag_end = ooxml.retagged(data, start, name, {"count": str(count)})
        if data[tag_end:tag_end + 2] == b"/>":
            raise Unreadable(f"{name}: an empty element where styles would go")
        return [(start, tag_end, tag), (end, end, children)]

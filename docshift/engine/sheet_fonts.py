"""The font of a workbook's cells with East Asian text, which LibreOffice writes as its own fallback font.

Excel gives a cell one font, which its FONT record names. LibreOffice 25.2's .xls import puts that name into a cell's
Western font only: the cell's East Asian font keeps LibreOffice's fallback, which on the engine's fonts is DejaVu
Sans. Its .xlsx export writes the East Asian font for a cell whose text is East Asian. So every such cell of
`12561-1.xls` (397 cells, every FONT record MS PGothic) says DejaVu Sans in Excel, without the Japanese charset,
and Excel draws it in a substitute. A plain ``soffice`` does the same.

LibreOffice writes the Western font of the same cells beside it: a font of the same size, colour and style, with the
.xls's name, family and charset. This mend gives each fallback font of ``styles.xml`` whose name the .xls has no FONT
record of the bytes of that twin, where its twins agree on a name (a font no .xls name has a twin of, LibreOffice's
own default for cells the .xls gives no font, stays). Everything else stays byte for byte.
"""

import re
from collections.abc import Iterator
from pathlib import Path

from docshift.engine import biff, ooxml
from docshift.engine.embedding import PartEdit, edit_parts, guarded, spliced
from docshift.engine.inventory.common import Unreadable, biff_string
from docshift.engine.inventory.package import NS_S, SEP, Package

STYLES = "xl/styles.xml"
FALLBACKS = {"DejaVu Sans"}  # what LibreOffice falls back to for East Asian text on the engine's fonts
BIFF_FONT = 0x0031
FONTS, FONT, NAME = (f"{NS_S}{SEP}{local}" for local in ("fonts", "font", "name"))
# what a font's twin may have otherwise: its name and what goes with the name
NAMED = re.compile(rb"<(?:\w+:)?(?:name|family|charset|scheme)\b[^>]*/>")


def mend(result: Path, source: Path, kind: str) -> int:
    """Give each East Asian fallback font of the .xlsx ``result`` its .xls font (``source``). Returns how many fonts
    (0: the file is untouched). Never raises for what the files hold."""
    if kind != "xls":
        return 0

    def parts(package: Package) -> Iterator[tuple[str, PartEdit]]:
        if STYLES in package.names and package.holds(STYLES, *(f'"{name}"'.encode() for name in FALLBACKS)):
            names = font_names(source)
            yield STYLES, lambda data, name: renamed(data, name, names)

    return guarded(lambda result, _: edit_parts(result, parts), result, source,
                   "the fonts of %s stay as LibreOffice wrote them: %r")


def font_names(source: Path) -> set[str]:
    """The names of the .xls's FONT records (BIFF8: ShortXLUnicodeString at byte 14)."""
    return {biff_string(data, body + 14, end, True, "cp1252") for _, sheet, data, body, end in
            biff.records(source, {BIFF_FONT}) if sheet is None and end - body > 15}


def renamed(data: bytes, name: str, names: set[str]) -> tuple[bytes, int]:
    """(``styles.xml`` (``data``) with each fallback font that the .xls (FONT ``names``) has not given the bytes of
    its first twin, where its twins agree on a name; how many)."""
    fonts = _fonts(data, name)
    alike = [(font_name, NAMED.sub(b"", data[start:end])) for font_name, start, end in fonts]
    edits = []
    for (font_name, start, end), (_, rest) in zip(fonts, alike, strict=True):
        if font_name not in FALLBACKS or font_name in names:
            continue
        twins = [(twin_name, data[twin_start:twin_end]) for (twin_name, twin_start, twin_end), (_, twin_rest)
                 in zip(fonts, alike, strict=True) if twin_rest == rest and twin_name in names]
        if twins and len({twin_name for twin_name, _ in twins}) == 1:
            edits.append((start, end, twins[0][1]))
    return spliced(data, edits), len(edits)


def _fonts(data: bytes, name: str) -> list[tuple[str | None, int, int]]:
    """(name, start, end) of each font of ``styles.xml``'s font list."""
    found: list[tuple[str | None, int, int]] = []
    stack: list[str] = []
    font_name: str | None = None
    at = -1  # where the font being read starts

    def start(tag: str, attributes: dict[str, str]) -> None:
        nonlocal font_name, at
        stack.append(tag)
        if tag == FONT and stack[-2:-1] == [FONTS]:
            font_name, at = None, reader.CurrentByteIndex
        elif tag == NAME and at >= 0 and stack[-2:-1] == [FONT]:
            font_name = attributes.get("val")

    def end(tag: str) -> None:
        nonlocal at
        stack.pop()
        if tag == FONT and at >= 0 and stack[-1:] == [FONTS]:
            found.append((font_name, at, ooxml.element_end(data, at, reader.CurrentByteIndex, name)))
            at = -1

    reader = ooxml.parser(name, Unreadable, start, end)
    ooxml.feed(reader, (data,), name, Unreadable)
    return found

"""A deck's theme colours in its .pptx, where LibreOffice writes its own.

LibreOffice 25.2 loads a .ppt's colour scheme onto each shape and run as a plain colour, and keeps no theme. Its
.pptx's theme is "LibreOffice" (accent1 ``18a303``, hyperlinks ``0000ee``), whatever the deck's scheme: a survey
found it so in each of 173 decks. The slides look the same, since every colour LibreOffice writes is RGB. But
PowerPoint's colour picker, its variants, and whatever is added in PowerPoint (a shape, a table, a chart, a link)
take LibreOffice's colours in place of the deck's.

``mend`` writes into each slide master's theme the colours PowerPoint gives the .ppt master its slides use
(``Inventory.palettes``), and the name of its design (a TemplateNameAtom's: "Blueprint"), which LibreOffice's import
drops: its theme was "Office", its master unnamed. On a dark background it also writes the master's colour map as
PowerPoint writes it. A
master whose slides come from masters of different colours, or whose theme another master shares with other colours,
is left as it is.

LibreOffice's theme names its own fonts too (Arial, and DejaVu Sans for East Asian text), and no run of its slides
names an East Asian font: a Japanese or Chinese text took DejaVu Sans in PowerPoint, which has no glyph for it, where
the .ppt names MS PGothic or SimSun. The theme's major and minor fonts are made the Latin and East Asian fonts of the
master's title and body styles (their first level, TextMasterStyleAtom), as PowerPoint makes them: over 86 masters
whose deck also holds PowerPoint's own theme, the Latin fonts agree on 85 (the other theme was saved before the
deck's fonts changed); PowerPoint's themes name no East Asian font but a list by script, which holds the master's in
49. Every other byte stays as it was: the theme's effects, and the slides.
"""

from collections.abc import Iterator, Sequence
from pathlib import Path

from docshift.engine import objects, ooxml
from docshift.engine.embedding import PartEdit, edit_parts, guarded, spliced
from docshift.engine.inventory.common import SCHEME_SLOTS, Palette, ThemeFont, Unreadable
from docshift.engine.inventory.package import NS_A, NS_P, SEP, Package
from docshift.engine.inventory.ppt_schemes import FONT_GROUPS, FONT_PLACES, FONT_SLOTS

COLOUR_SCHEME, COLOUR_MAP = f"{NS_A}{SEP}clrScheme", f"{NS_P}{SEP}clrMap"
THEME_ROOT, MASTER_SLIDE = f"{NS_A}{SEP}theme", f"{NS_P}{SEP}cSld"
RELATION = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"
LAYOUT, MASTER, THEME = (RELATION + kind for kind in ("slideLayout", "slideMaster", "theme"))
LIGHT_MAP = {"bg1": "lt1", "tx1": "dk1", "bg2": "lt2", "tx2": "dk2"}
DARK_MAP = {"bg1": "dk2", "tx1": "lt1", "bg2": "dk1", "tx2": "lt2"}


def mend(result: Path, source: Path, kind: str, palettes: dict[int, Palette]) -> int:
    """Give the slide masters of ``result`` (LibreOffice's export of the .ppt ``source``) the theme colours of the
    legacy masters their slides use (``palettes``: {slide number: colours}). Returns how many masters' themes were
    given theirs (0: the file is untouched). Never raises for what the file holds."""
    if kind != "ppt" or not palettes:
        return 0
    return guarded(lambda result, _: _mend(result, palettes), result, source,
                   "the theme colours of %s stay as LibreOffice wrote them: %r")


def _mend(result: Path, palettes: dict[int, Palette]) -> int:
    def parts(package: Package) -> Iterator[tuple[str, PartEdit]]:
        masters: dict[str, set[Palette | None]] = {}  # {master part: the colours of its slides' legacy masters}
        master_of: dict[str, str | None] = {}  # {layout part: its master part}, each layout's relationships read once
        for number, slide in enumerate(objects.slide_parts(package), 1):
            layout = package.related(slide, LAYOUT)
            if layout and layout not in master_of:
                master_of[layout] = package.related(layout, MASTER)
            if layout and (master := master_of[layout]):
                masters.setdefault(master, set()).add(palettes.get(number))
        theme_of = {master: package.related(master, THEME) for master in masters}
        themes: dict[str, set[Palette | None]] = {}
        for master, found in masters.items():
            if theme := theme_of[master]:
                themes.setdefault(theme, set()).update(found)
        for theme, found in sorted(themes.items()):
            palette = next(iter(found))
            if len(found) == 1 and palette is not None:
                yield theme, _colours(palette)
                for master in sorted(master for master, its in theme_of.items() if its == theme):
                    yield master, _colour_map(palette)

    return edit_parts(result, parts)


def _colours(palette: Palette) -> PartEdit:
    """The edit of a theme part that gives it ``palette``'s colours and fonts, and its design's name where it has
    one."""
    return lambda data, name: (named(refonted(recoloured(data, name, palette), name, palette.fonts), name, THEME_ROOT,
                                     palette.design), 1)


def _colour_map(palette: Palette) -> PartEdit:
    """The edit of a slide master part that gives it the colour map of ``palette``'s background (dark or light), and
    the name of its design (LibreOffice's masters have none: PowerPoint shows the design's name in the slide master
    view and the Design tab, the theme's)."""
    return lambda data, name: (named(mapped(data, name, palette.dark), name, MASTER_SLIDE, palette.design), 0)


def named(data: bytes, name: str, element: str, design: str) -> bytes:
    """Part ``name`` (``data``) with its ``element``'s ``name`` attribute ``design``; as it was for no design."""
    return ooxml.edit_tags(data, name, lambda tag, attributes: {"name": design} if tag == element
                           and attributes.get("name") != design else None) if design else data


def recoloured(data: bytes, name: str, palette: Palette) -> bytes:
    """The theme part ``name`` (``data``) with its colour scheme (the first ``a:clrScheme``) that of ``palette``,
    every other byte as it was."""
    found: list[int] = []  # where the scheme's start tag and its end tag start

    def start(tag: str, _: dict[str, str]) -> None:
        if tag == COLOUR_SCHEME and not found:
            found.append(reader.CurrentByteIndex)

    def end(tag: str) -> None:
        if tag == COLOUR_SCHEME and len(found) == 1:
            found.append(reader.CurrentByteIndex)

    reader = ooxml.parser(name, Unreadable, start, end)
    ooxml.feed(reader, (data,), name, Unreadable)
    if not found:
        raise Unreadable(f"{name}: no colour scheme")
    stop = ooxml.element_end(data, found[0], found[1], name)
    return data[:found[0]] + scheme_xml(ooxml.prefix(data, found[0], name), palette) + data[stop:]


def refonted(data: bytes, name: str, fonts: Sequence[ThemeFont | None]) -> bytes:
    """The theme part ``name`` (``data``) whose font scheme's major and minor Latin and East Asian fonts are
    ``fonts`` (in that order; one that is None stays as it was), every other byte as it was."""
    if not any(fonts):
        return data
    places: dict[tuple[str, str], int] = {}  # (majorFont or minorFont, latin or ea): where its start tag is
    inside = [""]

    def start(tag: str, _: dict[str, str]) -> None:
        if tag in FONT_GROUPS and not inside[0]:
            inside[0] = tag
        elif inside[0] and tag in FONT_SLOTS and (inside[0], tag) not in places:
            places[inside[0], tag] = reader.CurrentByteIndex

    def end(tag: str) -> None:
        if tag == inside[0]:
            inside[0] = ""

    reader = ooxml.parser(name, Unreadable, start, end)
    ooxml.feed(reader, (data,), name, Unreadable)
    edits = []
    for place, font in zip(FONT_PLACES, fonts, strict=False):
        if font is not None and place in places:
            tag, tag_end = ooxml.retagged(data, places[place], name, {
                "typeface": font.typeface, "pitchFamily": str(font.pitch_family), "charset": str(font.charset)})
            edits.append((places[place], tag_end, tag))
    return spliced(data, sorted(edits))


def scheme_xml(prefix: str, palette: Palette) -> bytes:
    """``palette`` as a DrawingML colour scheme whose elements carry ``prefix`` (bound to DrawingML's namespace)."""
    out = [f'<{prefix}clrScheme name="{ooxml.attribute_value(palette.name)}">']
    for slot, (rgb, system) in zip(SCHEME_SLOTS, palette.colours, strict=True):
        colour = f'sysClr val="{ooxml.attribute_value(system)}" lastClr="{rgb.upper()}"' if system \
            else f'srgbClr val="{rgb.upper()}"'
        out.append(f"<{prefix}{slot}><{prefix}{colour}/></{prefix}{slot}>")
    out.append(f"</{prefix}clrScheme>")
    return "".join(out).encode()


def mapped(data: bytes, name: str, dark: bool) -> bytes:
    """The slide master part ``name`` (``data``) whose colour map reads the background and text colours as a
    ``dark`` background's (or a light one's), every other byte as it was."""
    wanted = DARK_MAP if dark else LIGHT_MAP
    return ooxml.edit_tags(data, name, lambda tag, attributes: {
        key: value for key, value in wanted.items() if attributes.get(key) != value} if tag == COLOUR_MAP else None)

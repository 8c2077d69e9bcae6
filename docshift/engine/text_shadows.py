"""A .ppt's text shadows, which LibreOffice's PPTX export drops.

LibreOffice 25.2 loads a shadowed run of a .ppt (``CharShadowed``: its own formatting or its master's style's) and
writes every run's ``a:rPr`` an empty ``a:effectLst``: no shadow, and none that a style could give either. 15 of the
corpus's 133 decks lose shadowed text this way, on 86 of ``pp40only``'s 87 slides. The child that converted the deck
reads which text LibreOffice loaded shadowed (``uno/shadows.py``, only where the .ppt's formatting turns a shadow on:
``inventory/ppt_text_styles.py``), and this mend writes the shadow into those runs of the result.

The shadow is the one PowerPoint 97-2003 draws under text: hard (no blur), below and to the right, in the colour
scheme's shadow colour, which PowerPoint's theme of a .ppt keeps as bg2 (``inventory/ppt_schemes.py``; grey where
the scheme does not read). Its offset grows with the text, a twentieth of the font size each way (LibreOffice draws
a shadowed character of the .ppt about so). A slide's shape is found by its place among the slide's shapes with
text and by its text; a master's, in the slide masters and layouts, by its text (LibreOffice writes a master's shapes
into the one or the others). A run is shadowed when each of its visible characters was loaded so. Everything else
stays byte for byte.
"""

import hashlib
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from docshift.engine import objects, ooxml
from docshift.engine.embedding import PartEdit, edited, spliced
from docshift.engine.inventory.common import SCHEME_SLOTS, Palette, Unreadable
from docshift.engine.inventory.package import NS_A, NS_P, SEP, Package

SHAPE, BODY, PARAGRAPH, RUN, FIELD, BREAK, TEXT = (
    f"{NS_P}{SEP}sp", f"{NS_P}{SEP}txBody", *(f"{NS_A}{SEP}{local}" for local in ("p", "r", "fld", "br", "t")))
PROPERTIES, END_PROPERTIES, EFFECTS = (f"{NS_A}{SEP}{local}" for local in ("rPr", "endParaRPr", "effectLst"))
ITEMS = {RUN, FIELD, BREAK}
# CT_TextCharacterProperties' children after its effects, in order (its line and fill come before)
AFTER_EFFECTS = {f"{NS_A}{SEP}{local}" for local in (
    "highlight", "uLnTx", "uLn", "uFillTx", "uFill", "latin", "ea", "cs", "sym", "hlinkClick", "hlinkMouseOver",
    "rtl", "extLst")}
MASTER_PARTS = re.compile(r"ppt/(slideMasters|slideLayouts)/[^/]+\.xml")
GREY = "808080"  # the shadow colour of a deck whose scheme is not known
DEFAULT_SIZE = 1800  # hundredths of a point: a run that names no size
DIRECTION = 2700000  # 45 degrees, in 60000ths: below and to the right


@dataclass
class _Properties:
    """A run's ``a:rPr`` (or a paragraph's ``a:endParaRPr``) as read: where it starts, its size, and where its
    ``a:effectLst`` starts and ends (and whether that holds anything) or where one would go."""
    start: int
    size: int = DEFAULT_SIZE
    effects: tuple[int, int] | None = None
    effects_empty: bool = True
    insert_at: int = -1


@dataclass
class _Item:
    """A run, field or line break of a paragraph: its text, and its properties if it has any (a run without any is
    left as it is: LibreOffice writes them for each)."""
    text: str = ""
    properties: _Properties | None = None


@dataclass
class _Shape:
    """A ``p:sp`` with text: its items in order, paragraph by paragraph, and each paragraph's end properties."""
    paragraphs: list[tuple[list[_Item], _Properties | None]] = field(default_factory=list)

    def text(self) -> str:
        return "".join("".join(item.text for item in items) for items, _ in self.paragraphs)


def mend(result: Path, kind: str, shadowed: dict[str, Any] | None, palettes: dict[int, Palette]) -> int:
    """Write the shadows of the text LibreOffice loaded shadowed (``shadowed``, as the bridge read it) into the
    .pptx ``result``, in the shadow colour of each slide's scheme (``palettes``). Returns how many runs and paragraph
    ends got one (0: the file is untouched). Never raises for what the file holds."""
    if kind != "ppt" or not shadowed or not shadowed.get("pages"):
        return 0
    pages: dict[tuple[str, int], list[Any]] = {(kind, index): shapes for kind, index, shapes in shadowed["pages"]}

    def parts(package: Package) -> Iterator[tuple[str, PartEdit]]:
        slides = objects.slide_parts(package)
        for (page_kind, index), shapes in sorted(pages.items()):
            if page_kind == "slide" and index < len(slides):
                yield slides[index], _edit(shapes, _colour(palettes.get(index + 1)))
        on_masters = [shape for (page_kind, _), shapes in sorted(pages.items()) if page_kind == "master"
                      for shape in shapes]
        colours = {_colour(palette) for palette in palettes.values()}
        colour = colours.pop() if len(colours) == 1 else GREY
        # LibreOffice writes a master's shapes into its slide master or, as often, into each of its layouts: each
        # of those parts is searched for each shape's text
        for name in sorted(package.names) if on_masters else ():
            if MASTER_PARTS.fullmatch(name):
                yield name, _edit(on_masters, colour)

    return edited(result, parts, "the text shadows of %s stay as LibreOffice wrote them: %r")


def _colour(palette: Palette | None) -> str:
    """The shadow colour of a scheme: bg2, which is lt2 on a light background and dk1 on a dark one."""
    if palette is None:
        return GREY
    return palette.colours[SCHEME_SLOTS.index("dk1" if palette.dark else "lt2")][0].upper()


def _edit(shapes: list[Any], colour: str) -> PartEdit:
    return lambda data, name: shadowed_runs(data, name, shapes, colour)


def _visible(text: str) -> str:
    return "".join(text.split())


def digest(visible: str) -> str:
    """What stands for a shape's visible characters in the child's answer (``uno/shadows.py``, ``digest``)."""
    return hashlib.sha1(visible.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def shadowed_runs(data: bytes, name: str, shapes: list[Any], colour: str) -> tuple[bytes, int]:
    """(the slide or master part ``name`` (``data``) with a shadow in each run of ``shapes`` that was loaded
    shadowed; how many runs and paragraph ends got one). Each of ``shapes`` is ``[ordinal, digest, True]`` or
    ``[ordinal, digest, [[visible characters, shadowed], ...]]``: the shape of the part that is the ``ordinal``-th
    with text, where that one's visible characters have the ``digest``; else the first other that has."""
    found = _read(data, name)
    digests = [digest(_visible(shape.text())) for shape in found]
    used: set[int] = set()
    marked: list[_Properties] = []
    for ordinal, wanted, portions in shapes:
        order = [ordinal] + [index for index in range(len(found)) if index != ordinal]
        at = next((index for index in order if 0 <= index < len(found) and index not in used
                   and digests[index] == wanted), None)
        if at is not None:
            used.add(at)
            marked += _marked(found[at], portions)
    # an effect list that holds an effect already is not LibreOffice's empty one: it stays
    marked = [properties for properties in marked if properties.effects_empty]
    return spliced(data, [_shadow(data, name, properties, colour) for properties in marked]), len(marked)


def _marked(shape: _Shape, portions: Any) -> list[_Properties]:
    """The properties of ``shape`` to be given a shadow: all of them (``portions`` True), or those of each item
    whose visible characters were each loaded shadowed, and a paragraph's end where its every item is."""
    if portions is True:
        return [properties for items, end in shape.paragraphs
                for properties in [*(item.properties for item in items), end] if properties is not None]
    flags = [bool(shadow) for count, shadow in portions for _ in range(count)]
    if len(flags) != len(_visible(shape.text())):
        return []
    marked, at = [], 0
    for items, end in shape.paragraphs:
        all_shadowed = bool(items)
        for item in items:
            seen = len(_visible(item.text))
            shadow = seen > 0 and all(flags[at:at + seen])
            at += seen
            all_shadowed = all_shadowed and (shadow or seen == 0)
            if shadow and item.properties is not None:
                marked.append(item.properties)
        if all_shadowed and any(_visible(item.text) for item in items) and end is not None:
            marked.append(end)
    return marked


def _shadow(data: bytes, name: str, properties: _Properties, colour: str) -> tuple[int, int, bytes]:
    """(from, to, the bytes there) that give ``properties`` a shadow."""
    prefix = ooxml.prefix(data, properties.start, name)
    offset = properties.size / 100 / 20 * 12700  # EMU each way
    effects = (f'<{prefix}effectLst><{prefix}outerShdw dist="{round(offset * math.sqrt(2))}" dir="{DIRECTION}" '
               f'algn="tl" rotWithShape="0"><{prefix}srgbClr val="{colour}"/></{prefix}outerShdw>'
               f'</{prefix}effectLst>').encode()
    if properties.effects is not None:
        return (*properties.effects, effects)
    tag_end = ooxml.start_tag(data, properties.start, name)[1]
    if tag_end.group().endswith(b"/>"):
        local = ooxml.start_tag(data, properties.start, name)[0].decode()
        return tag_end.start(), tag_end.end(), b">" + effects + f"</{local}>".encode()
    return properties.insert_at, properties.insert_at, effects


def _read(data: bytes, name: str) -> list[_Shape]:
    """The shapes with text of the part ``name`` (``data``), in document order (a group's where it stands)."""
    shapes: list[_Shape] = []
    stack: list[str] = []
    shape: _Shape | None = None
    items: list[_Item] | None = None  # of the paragraph being read
    item: _Item | None = None
    properties: _Properties | None = None  # being read, and its depth
    depth = -1
    text: list[str] | None = None

    def start(tag: str, attributes: dict[str, str]) -> None:
        nonlocal shape, items, item, properties, depth, text
        at = reader.CurrentByteIndex
        stack.append(tag)
        if tag == SHAPE:
            shape = _Shape()
            shapes.append(shape)
        elif shape is None:
            return
        elif properties is not None:
            if len(stack) == depth + 1:
                if tag == EFFECTS:
                    properties.effects = (at, -1)
                elif tag in AFTER_EFFECTS and properties.insert_at < 0:
                    properties.insert_at = at
            elif len(stack) == depth + 2 and properties.effects is not None and properties.effects[1] < 0:
                properties.effects_empty = False
        elif tag == PARAGRAPH and len(stack) >= 2 and stack[-2] == BODY:
            items = []
            shape.paragraphs.append((items, None))
        elif items is not None and tag in ITEMS and stack[-2] == PARAGRAPH:
            item = _Item("\n" if tag == BREAK else "")
            items.append(item)
        elif items is not None and ((tag == PROPERTIES and item is not None and stack[-2] in ITEMS) or
                                    (tag == END_PROPERTIES and stack[-2] == PARAGRAPH)):
            size = attributes.get("sz", "")
            properties, depth = _Properties(at, int(size) if size.isdigit() else DEFAULT_SIZE), len(stack)
            if tag == PROPERTIES and item is not None:
                item.properties = properties
            else:
                shape.paragraphs[-1] = (items, properties)
        elif tag == TEXT and item is not None:
            text = []

    def end(tag: str) -> None:
        nonlocal shape, items, item, properties, depth, text
        at = reader.CurrentByteIndex
        if properties is not None:
            if len(stack) == depth + 1 and tag == EFFECTS and properties.effects is not None:
                properties.effects = (properties.effects[0], ooxml.element_end(data, properties.effects[0], at, name))
            elif len(stack) == depth:
                if properties.insert_at < 0:
                    properties.insert_at = at
                properties = None
        elif tag == TEXT and text is not None and item is not None:
            item.text += "".join(text)
            text = None
        elif tag in ITEMS and item is not None and stack[-2:-1] == [PARAGRAPH]:
            item = None
        elif tag == PARAGRAPH:
            items = None
        elif tag == SHAPE:
            shape = None
        stack.pop()

    def characters(found: str) -> None:
        if text is not None:
            text.append(found)

    reader = ooxml.parser(name, Unreadable, start, end, characters)
    ooxml.feed(reader, (data,), name, Unreadable)
    return [found for found in shapes if _visible(found.text())]

"""A deck's master text styles, which LibreOffice's PPTX export leaves out.

LibreOffice 25.2 writes a slide master without ``p:txStyles`` and its layouts' placeholders without a list style:
each run of the result is formatted, so the slides look right, but a slide added in PowerPoint, or a placeholder
reset, takes PowerPoint's default fonts, sizes, bullets and indents, not the deck's. The master's own title and
body placeholders hold what the .ppt's master styles were, as LibreOffice loaded them: their prompt texts ("Click
to edit the title text format", one paragraph per outline level), formatted with them. This mend writes each level
of those into the master's ``p:txStyles`` (``titleStyle``, ``bodyStyle``).

A paragraph of the slides, layouts and master that inherits from those styles must look as it did. LibreOffice
leaves out what a paragraph or run has at its default: no left margin, indent, alignment, spacing or italics where
they are nought, left or off. Each such paragraph and run of a title or body placeholder is given that default
explicitly where the style now sets it (``marL="0"``, ``a:buNone``, ``i="0"``, ...); a property that has no known
default (a size, a fill, a font) goes into a style only where every paragraph and run that inherits it has its own.
Everything else stays byte for byte.
"""

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from docshift.engine import ooxml, placeholders
from docshift.engine.embedding import PartEdit, edited, part_bytes, spliced
from docshift.engine.inventory.common import Unreadable
from docshift.engine.inventory.package import NS_A, NS_P, SEP, Package
from docshift.engine.slide_schemes import LAYOUT, MASTER

SHAPE, PLACEHOLDER, BODY = (f"{NS_P}{SEP}{local}" for local in ("sp", "ph", "txBody"))
TEXT_STYLES, EXTENSIONS = f"{NS_P}{SEP}txStyles", f"{NS_P}{SEP}extLst"
PARAGRAPH, PARAGRAPH_PROPERTIES, END_PROPERTIES, PROPERTIES = (
    f"{NS_A}{SEP}{local}" for local in ("p", "pPr", "endParaRPr", "rPr"))
RUN, FIELD, BREAK = (f"{NS_A}{SEP}{local}" for local in ("r", "fld", "br"))
PLACEHOLDER_TAG = placeholders.PLACEHOLDER_TAG  # a part without one is not read
TITLES = {"title", "ctrTitle"}
NOT_BODIES = TITLES | {"dt", "ftr", "sldNum", "hdr", "sldImg"}  # a placeholder of another type inherits the body's
# a paragraph's properties' children, in the schema's order: the element or elements of each place, and the one
# that says what a paragraph that names none of them has
PLACES: list[tuple[set[str], str | None]] = [
    ({"lnSpc"}, '<{a}lnSpc><{a}spcPct val="100000"/></{a}lnSpc>'),
    ({"spcBef"}, '<{a}spcBef><{a}spcPts val="0"/></{a}spcBef>'),
    ({"spcAft"}, '<{a}spcAft><{a}spcPts val="0"/></{a}spcAft>'),
    ({"buClrTx", "buClr"}, "<{a}buClrTx/>"),
    ({"buSzTx", "buSzPct", "buSzPts"}, "<{a}buSzTx/>"),
    ({"buFontTx", "buFont"}, "<{a}buFontTx/>"),
    ({"buNone", "buAutoNum", "buChar", "buBlip"}, "<{a}buNone/>"),
    ({"tabLst"}, None), ({"defRPr"}, None), ({"extLst"}, None)]
PLACE = {local: index for index, (locals_, _) in enumerate(PLACES) for local in locals_}
STYLED_PLACES = range(7)  # the spacing and bullet places go into a style; tab stops do not
# a paragraph's attributes that go into a style, and what a paragraph that names none has
PARAGRAPH_DEFAULTS = {"marL": "0", "indent": "0", "algn": "l"}
RUN_DEFAULTS = {"b": "0", "i": "0"}  # a run's attributes that go into a style, with a default
BULLETS = {"buAutoNum", "buChar", "buBlip"}
FILLS = {"noFill", "solidFill", "gradFill", "blipFill", "pattFill", "grpFill"}
# a run's properties' children that go into a style only where every run that inherits it has its own, in order
RUN_CHILDREN = ["fill", "latin", "ea", "cs"]


@dataclass
class _Properties:
    """An ``a:rPr`` or ``a:endParaRPr``: where it starts, its attributes, where each of its children starts and
    where expat saw it end (``_bytes``), by kind."""
    start: int
    attributes: dict[str, str]
    children: dict[str, tuple[int, int]] = field(default_factory=dict)
    line_break: bool = False


@dataclass
class _Paragraph:
    """A paragraph of a title or body placeholder: where it and its properties start (-1: none), its level and
    properties' attributes, where each of their children is, where their end tag is (-1: none), its runs'."""
    style: str
    shape: int
    start: int
    properties: int = -1
    attributes: dict[str, str] = field(default_factory=dict)
    children: dict[str, tuple[int, int]] = field(default_factory=dict)
    close: int = -1
    runs: list[_Properties] = field(default_factory=list)

    @property
    def level(self) -> int:
        level = self.attributes.get("lvl", "0")
        return int(level) if level.isdigit() and int(level) < 9 else 0


@dataclass
class _Level:
    """A style's level: the paragraph's attributes and children, the runs' attributes and children."""
    attributes: dict[str, str]
    children: dict[int, bytes]  # by place
    run_attributes: dict[str, str]
    run_children: dict[str, bytes]


def mend(result: Path, kind: str) -> int:
    """Write the text styles of each slide master of the .pptx ``result`` from its placeholders' prompt texts.
    Returns how many masters got them (0: the file is untouched). Never raises for what the file holds."""
    if kind != "ppt":
        return 0

    def parts(package: Package) -> Iterator[tuple[str, PartEdit]]:
        for master, inheriting in _families(package).items():
            data, outline = part_bytes(package, master), _Outline()
            read = {master: (data, _read(data, master, outline))}
            if outline.present:
                continue
            if outline.root < 0 or outline.place < 0:
                raise Unreadable(f"{master}: no root element")
            place, root = outline.place, outline.root
            for name in inheriting:
                part = part_bytes(package, name)
                read[name] = (part, _read(part, name) if PLACEHOLDER_TAG.search(part) else [])
            # the prompts of each style: the master's, else (where LibreOffice wrote the master page's shapes into
            # the layouts) its first layout's that has them
            styles: dict[tuple[str, int], _Level] = {}
            for style in ("title", "body"):
                for name, (part, found) in read.items():
                    if name != master and not name.startswith("ppt/slideLayouts/"):
                        break  # a slide's text is no prompt
                    prompts = _styles(part, [paragraph for paragraph in found if paragraph.style == style])
                    if prompts:
                        styles.update(prompts)
                        break
            if not styles:
                continue
            _settle(styles, [paragraph for _, found in read.values() for paragraph in found])
            for name, (part, found) in read.items():
                edits = [edit for paragraph in found for edit in _pins(part, name, paragraph, styles)]
                if name == master:
                    edits.append((place, place, _text_styles(data, root, styles, _drawing_prefix(read))))
                if edits:
                    yield name, _fixed(spliced(part, edits), 1 if name == master else 0)

    return edited(result, parts, "the master text styles of %s stay as LibreOffice left them: %r")


def _drawing_prefix(read: dict[str, tuple[bytes, list[_Paragraph]]]) -> str:
    """The prefix of the drawing elements of the parts ``read`` (LibreOffice writes "a:" in each)."""
    part, found = next((part, found) for part, found in read.values() if found)
    return ooxml.prefix(part, found[0].start, "a paragraph")


def _fixed(data: bytes, count: int) -> PartEdit:
    return lambda _data, _name: (data, count)


def _families(package: Package) -> dict[str, list[str]]:
    """{slide master: the layouts and slides that inherit its styles}."""
    families: dict[str, list[str]] = {name: [] for name in package.matching(r"ppt/slideMasters/[^/]+\.xml")}
    master_of: dict[str, str] = {}
    for layout in package.matching(r"ppt/slideLayouts/[^/]+\.xml"):
        if (master := package.related(layout, MASTER)) in families:
            families[master].append(layout)
            master_of[layout] = master
    for slide in package.matching(r"ppt/slides/[^/]+\.xml"):
        if (used := package.related(slide, LAYOUT)) in master_of:
            families[master_of[used]].append(slide)
    return families


@dataclass
class _Outline:
    """Of a master, as ``_read`` found it: whether it holds text styles, where they go (before its extensions, else
    before its root's end tag) and where its root's start tag is (-1: not found)."""
    present: bool = False
    place: int = -1
    root: int = -1


def _read(data: bytes, name: str, outline: _Outline | None = None) -> list[_Paragraph]:
    """The paragraphs of the title and body placeholders of the part ``name`` (``data``), in document order; the
    part's ``outline`` filled in, if given. Of a slide or layout only the shapes that hold a placeholder are parsed,
    where their tags find them all (``placeholders``); otherwise, or where one does not parse so, the whole part."""
    alone = None if outline is not None else placeholders.documents(data)
    if alone is not None:
        paragraphs: list[_Paragraph] = []
        try:
            for document, shift in alone:
                _parse(data, name, document, shift, paragraphs)
            return paragraphs
        except Unreadable:
            pass
    return _parse(data, name, data, 0, [], outline)


def _parse(data: bytes, name: str, document: bytes, shift: int, paragraphs: list[_Paragraph],
           outline: _Outline | None = None) -> list[_Paragraph]:
    """``_read``'s parse of ``document``, whose byte ``n`` is byte ``n + shift`` of the part ``data``: its
    paragraphs appended to ``paragraphs``."""
    stack: list[str] = []
    style: str | None = None  # of the placeholder being read, and where it starts
    shape = -1
    paragraph: _Paragraph | None = None
    properties: _Properties | None = None
    children: dict[str, tuple[int, int]] | None = None  # of the properties being read, and their depth
    depth = -1

    def start(tag: str, attributes: dict[str, str]) -> None:
        nonlocal style, shape, paragraph, properties, children, depth
        at = reader.CurrentByteIndex + shift
        stack.append(tag)
        if outline is not None:
            outline.present = outline.present or tag == TEXT_STYLES
            if len(stack) == 1:
                outline.root = at
            elif len(stack) == 2 and tag == EXTENSIONS and outline.place < 0:
                outline.place = at
        if tag == SHAPE:
            style, shape = None, at
        elif tag == PLACEHOLDER and SHAPE in stack:
            kind = attributes.get("type", "obj")
            style = "title" if kind in TITLES else None if kind in NOT_BODIES else "body"
        elif children is not None:
            if len(stack) == depth + 1:
                children.setdefault(tag.rpartition(SEP)[2], (at, -1))
        elif tag == PARAGRAPH and style is not None and stack[-2] == BODY:
            paragraph = _Paragraph(style, shape, at)
            paragraphs.append(paragraph)
        elif paragraph is None:
            return
        elif tag == PARAGRAPH_PROPERTIES and stack[-2] == PARAGRAPH:
            paragraph.properties, paragraph.attributes = at, attributes
            children, depth = paragraph.children, len(stack)
        elif (tag == PROPERTIES and stack[-2] in (RUN, FIELD, BREAK) and stack[-3] == PARAGRAPH) or \
                (tag == END_PROPERTIES and stack[-2] == PARAGRAPH):
            properties = _Properties(at, attributes, line_break=stack[-2] == BREAK)
            paragraph.runs.append(properties)
            children, depth = properties.children, len(stack)

    def end(tag: str) -> None:
        nonlocal style, paragraph, properties, children, depth
        at = reader.CurrentByteIndex + shift
        if outline is not None and len(stack) == 1 and outline.place < 0:
            outline.place = at
        if children is not None and len(stack) == depth + 1:
            local = tag.rpartition(SEP)[2]
            began, ended = children[local]
            if ended < 0:  # where the element's bytes end is found only for those a style takes (``_bytes``)
                children[local] = (began, at)
        elif children is not None and len(stack) == depth:
            if paragraph is not None and properties is None and \
                    not ooxml.start_tag(data, paragraph.properties, name)[1].group().endswith(b"/>"):
                paragraph.close = at
            children, properties, depth = None, None, -1
        elif tag == PARAGRAPH:
            paragraph = None
        elif tag == SHAPE:
            style = None
        stack.pop()

    reader = ooxml.parser(name, Unreadable, start, end)
    ooxml.feed(reader, (document,), name, Unreadable)
    return paragraphs


def _styles(data: bytes, found: list[_Paragraph]) -> dict[tuple[str, int], _Level]:
    """{(title or body, level): the style} of the first title and body placeholder's prompt paragraphs of a master
    (``data``, its ``found`` paragraphs)."""
    styles: dict[tuple[str, int], _Level] = {}
    first: dict[str, int] = {}  # where each style's first placeholder starts: the others are not its prompts
    for paragraph in found:
        key = (paragraph.style, paragraph.level)
        runs = [run for run in paragraph.runs if not run.line_break]
        if first.setdefault(paragraph.style, paragraph.shape) != paragraph.shape or key in styles or not runs \
                or paragraph.properties < 0:
            continue
        run = runs[0]
        run_children = {kind: _bytes(data, run.children[local]) for kind, local in (
            ("fill", next((local for local in run.children if local in FILLS), "")),
            *((local, local) for local in RUN_CHILDREN[1:])) if local in run.children}
        styles[key] = _Level(
            {key: value for key, value in paragraph.attributes.items() if key in PARAGRAPH_DEFAULTS},
            {PLACE[local]: _bytes(data, place) for local, place in paragraph.children.items()
             if PLACE.get(local, -1) in STYLED_PLACES},
            {key: value for key, value in run.attributes.items()
             if key in RUN_DEFAULTS or (key == "sz" and _size(value))}, run_children)
    return styles


def _bytes(data: bytes, place: tuple[int, int]) -> bytes:
    """The bytes of the element of a master's ``data`` that starts at ``place[0]`` and that expat saw end at
    ``place[1]``."""
    return data[place[0]:ooxml.element_end(data, place[0], place[1], "the master")]


def _size(value: str) -> bool:
    """Whether ``value`` is a size a style may hold (ST_TextFontSize: 1 to 4,000 points, in hundredths): LibreOffice
    writes a damaged deck's larger ones as they are, and a style holds none of them."""
    return value.isdigit() and 100 <= int(value) <= 400000


def _settle(styles: dict[tuple[str, int], _Level], inheriting: list[_Paragraph]) -> None:
    """Leave out of ``styles`` what an ``inheriting`` paragraph or run would take from them that it cannot be given
    explicitly: a size, fill or font it has not got, a left alignment of a right-to-left paragraph, a margin or
    indent of a bulleted paragraph that names none (PowerPoint takes nought, LibreOffice indents it)."""
    for paragraph in inheriting:
        level = styles.get((paragraph.style, paragraph.level))
        if level is None:
            continue
        if "algn" not in paragraph.attributes and paragraph.attributes.get("rtl") == "1":
            level.attributes.pop("algn", None)
        if paragraph.children.keys() & BULLETS:  # LibreOffice indents a bullet it names no margins for
            for key in ("marL", "indent"):
                if key not in paragraph.attributes:
                    level.attributes.pop(key, None)
        for run in paragraph.runs:
            if "sz" not in run.attributes:
                level.run_attributes.pop("sz", None)
            if not run.line_break:  # a line break's font and fill draw nothing
                for kind in list(level.run_children):
                    if not (run.children.keys() & FILLS if kind == "fill" else kind in run.children):
                        del level.run_children[kind]


def _pins(data: bytes, name: str, paragraph: _Paragraph, styles: dict[tuple[str, int], _Level]) \
        -> list[tuple[int, int, bytes]]:
    """The edits that give ``paragraph`` and its runs explicitly each default that its style now sets otherwise."""
    level = styles.get((paragraph.style, paragraph.level))
    if level is None:
        return []
    a = ooxml.prefix(data, paragraph.start, name)
    attributes = {key: PARAGRAPH_DEFAULTS[key] for key in level.attributes if key not in paragraph.attributes}
    missing = sorted(place for place in level.children
                     if not any(PLACE.get(local) == place for local in paragraph.children))
    edits: list[tuple[int, int, bytes]] = []
    for run in paragraph.runs:
        if not run.line_break:
            changes = {key: RUN_DEFAULTS[key] for key in level.run_attributes if key in RUN_DEFAULTS
                       and key not in run.attributes}
            if changes:
                edits.append(_retagged(data, name, run.start, changes))
    if paragraph.properties < 0:
        if attributes or missing:
            tag_end = ooxml.start_tag(data, paragraph.start, name)[1]
            written = _element(f"{a}pPr", attributes, "".join(PLACES[place][1] or "" for place in missing)
                               .format(a=a)).encode()
            if tag_end.group().endswith(b"/>"):
                edits.append((tag_end.start(), tag_end.end(), b">" + written + f"</{a}p>".encode()))
            else:
                edits.append((tag_end.end(), tag_end.end(), written))
        return edits
    if attributes:
        edits.append(_retagged(data, name, paragraph.properties, attributes))
    if missing and paragraph.close < 0:  # an empty a:pPr
        tag_end = ooxml.start_tag(data, paragraph.properties, name)[1]
        pins = "".join(PLACES[place][1] or "" for place in missing).format(a=a)
        edits.append((tag_end.start(), tag_end.end(), f">{pins}</{a}pPr>".encode()))
    elif missing:
        following = sorted((PLACE.get(local, len(PLACES)), start) for local, (start, _) in paragraph.children.items())
        for place in missing:
            at = next((start for later, start in following if later > place), paragraph.close)
            edits.append((at, at, (PLACES[place][1] or "").format(a=a).encode()))
    return edits


def _retagged(data: bytes, name: str, at: int, changes: dict[str, str]) -> tuple[int, int, bytes]:
    """The edit that gives the start tag at ``at`` the attributes ``changes``."""
    tag, end = ooxml.retagged(data, at, name, changes)
    return at, end, tag


def _element(tag: str, attributes: dict[str, str], content: str) -> str:
    written = "".join(f' {key}="{ooxml.attribute_value(value)}"' for key, value in attributes.items())
    return f"<{tag}{written}>{content}</{tag}>" if content else f"<{tag}{written}/>"


def _text_styles(data: bytes, root: int, styles: dict[tuple[str, int], _Level], a: str) -> bytes:
    """The master's ``p:txStyles`` (``data``, its root at ``root``), its drawing elements prefixed ``a``."""
    p = ooxml.prefix(data, root, "master")
    written = []
    for style in ("title", "body"):
        levels = sorted((level, found) for (kind, level), found in styles.items() if kind == style)
        if not levels:
            continue
        written.append(f"<{p}{style}Style>")
        for number, level in levels:
            run = _element(f"{a}defRPr", level.run_attributes, "".join(
                level.run_children[kind].decode() for kind in RUN_CHILDREN if kind in level.run_children))
            children = "".join(level.children[place].decode() for place in sorted(level.children))
            written.append(_element(f"{a}lvl{number + 1}pPr", level.attributes, children + run))
        written.append(f"</{p}{style}Style>")
    return f"<{p}txStyles>{''.join(written)}</{p}txStyles>".encode()

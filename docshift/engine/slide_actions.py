"""What a deck's shapes run on a click or as the mouse passes over them, put back into the .pptx where LibreOffice
drops it: a verb of an embedded object, and a macro.

PowerPoint's Action Settings can make an embedded object open, edit or play during the show ("Object action"), and
any shape run a macro of the deck's VBA project ("Run macro": the buttons of a quiz, a menu). The .ppt holds such an
action in the shape's client data: an InteractiveInfoAtom whose action is II_OLEAction, with the index of the
object's verb, or II_MacroAction, with a MacroNameAtom naming the macro ([MS-PPT] 2.6.10; its container's
recInstance 0: a click, 1: the mouse over it). A .pptx holds it in the shape's ``p:cNvPr`` as
``<a:hlinkClick r:id="" action="ppaction://ole?verb=n"/>`` or ``action="ppaction://macro?name=..."`` (and
``a:hlinkHover``). LibreOffice 25.2 drops both on load: neither its ODF nor its OOXML export of such a deck has one,
and the object or the button shows but does nothing in the show.

``mend`` writes each back into the result's bytes. An object's verb goes to a slide's ``p:oleObj`` matched with
the OLE shapes of the legacy slide in drawing order, only where both counts agree, as ``objects.mend`` matches
them. A macro goes to the shape of the slide's shape tree that stands where the legacy shape is anchored, the only
one there (its ClientAnchor against the ``a:off`` and ``a:ext`` LibreOffice wrote, as ``slide_pictures`` finds a
picture), and only where the result keeps the deck's VBA project: in a ``.pptx`` without one it would run nothing.
A shape that already has a click (or a mouse-over) keeps its own. The report's ``actions`` counts them on both
sides.
"""

import zipfile
from pathlib import Path
from typing import Any

from docshift.engine import objects, ooxml
from docshift.engine.embedding import guarded, part_bytes
from docshift.engine.inventory import officeart
from docshift.engine.inventory.common import Unreadable
from docshift.engine.inventory.package import NS_A, NS_P, NS_R, SEP, Package
from docshift.engine.inventory.ppt import _Presentation
from docshift.engine.inventory.ppt_sounds import OLE_VERB, RUN_MACRO
from docshift.engine.slide_pictures import Rect, anchor_rect, near

FRAME, TREE, PROPERTIES = f"{NS_P}{SEP}graphicFrame", f"{NS_P}{SEP}spTree", f"{NS_P}{SEP}cNvPr"
SHAPES = {f"{NS_P}{SEP}{local}" for local in ("sp", "pic", "graphicFrame", "cxnSp", "grpSp")}
OFFSET, EXTENT = f"{NS_A}{SEP}off", f"{NS_A}{SEP}ext"
ACTIONS = {0: "hlinkClick", 1: "hlinkHover"}  # by the InteractiveInfo's recInstance, in the order the schema wants
WRITTEN = {f"{NS_A}{SEP}{local}": instance for instance, local in ACTIONS.items()}


class Placed:
    """A shape of a result slide: where its ``p:cNvPr`` start tag is, the actions it has by recInstance, and its
    rectangle (x, y, width, height in EMU) as its first ``a:off`` and ``a:ext`` give it."""

    def __init__(self, depth: int) -> None:
        self.depth = depth
        self.at: int | None = None
        self.present: set[int] = set()
        self.inside = False  # in its p:cNvPr
        self.offset: tuple[float, float] | None = None
        self.rect: Rect | None = None


def mend(result: Path, source: Path, kind: str, expected: int | None, macros: bool) -> int:
    """Put back into ``result`` (LibreOffice's export of the .ppt ``source``) the actions of its shapes that run a
    verb of an embedded object, and those that run a macro where ``macros`` (the result keeps the VBA project);
    ``expected``: how many the legacy file's slides hold (the report's ``actions``; nothing is read when it holds
    none). Returns how many were written (0: the file is untouched). Never raises for what the files hold: a part
    that does not read leaves the file as it was."""
    if kind != "ppt" or not expected:
        return 0
    return guarded(lambda result, source: _mend(result, source, macros), result, source,
                   "the actions of %s stay as LibreOffice wrote them: %r")


def _mend(result: Path, source: Path, macros: bool) -> int:
    show = _Presentation.of_file(source)
    legacy = [show.shapes(located) if located else [] for located in show.slide_containers()]
    with zipfile.ZipFile(result) as zf:
        package = Package(zf)
        slides = objects.slide_parts(package)
        if len(slides) != len(legacy):
            return 0  # the slides themselves do not pair up (the content check refuses such a result)
        edits: dict[str, bytes] = {}
        written = 0
        for slide, shapes in zip(slides, legacy):
            wanted = [shape for shape in shapes if _runs(shape, macros)]
            if not wanted:
                continue
            data = part_bytes(package, slide)
            oles, tree = _shapes(data, slide)
            actions: dict[int, tuple[Placed, dict[int, str]]] = {}  # p:cNvPr offset: (the shape, what it runs)
            ole_shapes = objects.ole_shapes(shapes)
            if len(oles) == len(ole_shapes):  # else the objects do not pair up
                for found, shape in zip(oles, ole_shapes):
                    _give(actions, found, shape, OLE_VERB)
            for shape in wanted:
                anchor = anchor_rect(shape.anchor)  # None in a group: its anchor is the group's
                there = [found for found in tree if anchor and found.rect and near(found.rect, anchor)]
                if macros and len(there) == 1:
                    _give(actions, there[0], shape, RUN_MACRO)
            edited, count = _with_actions(data, slide, list(actions.values()))
            if count:
                edits[slide] = edited
                written += count
        if written:
            ooxml.rewrite(zf, result, edits)
    return written


def _give(actions: dict[int, tuple[Placed, dict[int, str]]], found: Placed | None, shape: officeart.Shape,
          kind: str) -> None:
    """Into ``actions``: what the legacy ``shape`` runs of ``kind`` (``OLE_VERB``, ``RUN_MACRO``), for the result's
    shape ``found``."""
    if found is None or found.at is None:
        return
    for instance, action in shape.actions.items():
        if action.startswith(kind):
            actions.setdefault(found.at, (found, {}))[1][instance] = action


def _runs(shape: officeart.Shape, macros: bool) -> bool:
    """Whether the legacy ``shape`` runs something ``mend`` puts back."""
    return any(action.startswith(OLE_VERB) or (macros and action.startswith(RUN_MACRO))
               for action in shape.actions.values())


def _shapes(data: bytes, name: str) -> tuple[list[Placed | None], list[Placed]]:
    """([the frame of each ``p:oleObj`` of the slide ``data``, in document order; None where it stands in no frame
    with properties], [each shape of its shape tree, groups as one])."""
    stack: list[Placed] = []
    oles: list[Placed | None] = []
    tree: list[Placed] = []
    depth, tree_depth = 0, -1

    def start(tag: str, attributes: dict[str, str]) -> None:
        nonlocal depth, tree_depth
        depth += 1
        if tag == TREE and tree_depth < 0:
            tree_depth = depth
        if tag in SHAPES and (depth == tree_depth + 1 or tag == FRAME):
            stack.append(Placed(depth))
            if depth == tree_depth + 1:
                tree.append(stack[-1])
            return
        found = stack[-1] if stack else None
        if tag == objects.OLE_OBJ:
            oles.append(found if found is not None and found.at is not None else None)
        elif found is None:
            return
        elif tag == PROPERTIES and depth == found.depth + 2 and found.at is None:
            found.at, found.inside = reader.CurrentByteIndex, True
        elif tag in WRITTEN and found.inside:
            found.present.add(WRITTEN[tag])
        elif tag == OFFSET and found.offset is None:
            found.offset = _numbers(attributes, "x", "y")
        elif tag == EXTENT and found.offset is not None and found.rect is None:
            size = _numbers(attributes, "cx", "cy")
            found.rect = (*found.offset, *size) if size else None

    def end(tag: str) -> None:
        nonlocal depth
        if stack and tag == PROPERTIES and depth == stack[-1].depth + 2:
            stack[-1].inside = False
        if stack and tag in SHAPES and depth == stack[-1].depth:
            stack.pop()
        depth -= 1

    reader = ooxml.parser(name, Unreadable, start, end)
    ooxml.feed(reader, (data,), name, Unreadable)
    return oles, tree


def _numbers(attributes: dict[str, str], *names: str) -> Any:
    """The attributes ``names`` as numbers, or None when one is missing or no number."""
    try:
        return tuple(float(attributes[name]) for name in names)
    except (KeyError, ValueError):
        return None


def _with_actions(data: bytes, name: str, wanted: list[tuple[Placed, dict[int, str]]]) -> tuple[bytes, int]:
    """The slide ``data`` with each shape's ``p:cNvPr`` (``wanted``: the shape, its actions by recInstance) given
    its actions, first among its children, every other byte as it was; and how many were written. A shape that
    has an action of its own keeps it. Each new element declares the namespaces it uses."""
    out, done, count = [], 0, 0
    for found, actions in sorted(wanted, key=lambda item: item[0].at or 0):
        if found.present or found.at is None:
            continue  # a shape with an action of its own keeps it, and the schema's order, as it is
        added = "".join(f'<a:{ACTIONS[instance]} xmlns:a="{NS_A}" xmlns:r="{NS_R}" r:id="" '
                        f'action="{ooxml.attribute_value(actions[instance])}"/>' for instance in sorted(actions))
        qualified, tag_end, _ = ooxml.start_tag(data, found.at, name)
        if tag_end.group().endswith(b"/>"):
            out += [data[done:tag_end.start()], b">", added.encode(), b"</" + qualified + b">"]
        else:
            out += [data[done:tag_end.end()], added.encode()]
        done = tag_end.end()
        count += len(actions)
    return b"".join([*out, data[done:]]), count

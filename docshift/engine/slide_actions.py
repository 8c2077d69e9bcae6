"""The verbs a deck's embedded objects run on a click or as the mouse passes over them, put back into the .pptx.

PowerPoint's Action Settings can make an embedded object open, edit or play during the show ("Object action"). The
.ppt holds such an action in the shape's client data: an InteractiveInfoAtom whose action is II_OLEAction, with the
index of the object's verb ([MS-PPT] 2.6.10; its container's recInstance 0: a click, 1: the mouse over it); a
.pptx holds it in the frame's ``p:cNvPr`` as ``<a:hlinkClick r:id="" action="ppaction://ole?verb=n"/>`` (and
``a:hlinkHover``). LibreOffice 25.2 drops them on load: neither its ODF nor its OOXML export of such a deck has
one, and the object shows but does nothing in the show.

``mend`` writes each back into the result's bytes. A slide's ``p:oleObj`` are matched with the OLE shapes of the
legacy slide in drawing order, only where both counts agree, as ``objects.mend`` matches them; a frame that
already has a click (or a mouse-over) keeps its own. The report's ``actions`` counts them on both sides.
"""

import zipfile
from pathlib import Path

from docshift.engine import objects, ooxml
from docshift.engine.embedding import guarded, part_bytes
from docshift.engine.inventory.common import Unreadable
from docshift.engine.inventory.package import NS_A, NS_P, NS_R, SEP, Package
from docshift.engine.inventory.ppt import _Presentation

FRAME, NON_VISUAL, PROPERTIES = f"{NS_P}{SEP}graphicFrame", f"{NS_P}{SEP}nvGraphicFramePr", f"{NS_P}{SEP}cNvPr"
ACTIONS = {0: "hlinkClick", 1: "hlinkHover"}  # by the InteractiveInfo's recInstance, in the order the schema wants
WRITTEN = {f"{NS_A}{SEP}{local}" for local in ACTIONS.values()}


def mend(result: Path, source: Path, kind: str, expected: int | None) -> int:
    """Put back into ``result`` (LibreOffice's export of the .ppt ``source``) the actions of its embedded objects
    that run a verb; ``expected``: how many the legacy file's slides hold (the report's ``actions``; nothing
    is read when it holds none). Returns how many were written (0: the file is untouched). Never raises for what
    the files hold: a part that does not read leaves the file as it was."""
    if kind != "ppt" or not expected:
        return 0
    return guarded(_mend, result, source, "the object actions of %s stay as LibreOffice wrote them: %r")


def _mend(result: Path, source: Path) -> int:
    show = _Presentation.of_file(source)
    legacy = [objects.ole_shapes(show.shapes(located)) if located else [] for located in show.slide_containers()]
    with zipfile.ZipFile(result) as zf:
        package = Package(zf)
        slides = objects.slide_parts(package)
        if len(slides) != len(legacy):
            return 0  # the slides themselves do not pair up (the content check refuses such a result)
        edits: dict[str, bytes] = {}
        written = 0
        for slide, shapes in zip(slides, legacy):
            if not any(shape.verbs for shape in shapes) or not package.holds(slide, b"oleObj"):
                continue
            data = part_bytes(package, slide)
            frames = _frames(data, slide)
            if len(frames) != len(shapes):
                continue  # the objects do not pair up
            wanted = [(frame, shape.verbs) for frame, shape in zip(frames, shapes) if frame and shape.verbs]
            edited, count = _with_actions(data, slide, wanted)
            if count:
                edits[slide] = edited
                written += count
        if written:
            ooxml.rewrite(zf, result, edits)
    return written


def _frames(data: bytes, name: str) -> list[tuple[int, set[int]] | None]:
    """For each ``p:oleObj`` of the slide ``data`` in document order: (the byte offset of its frame's ``p:cNvPr``
    start tag, the actions it already has by recInstance), or None where it stands in no frame with one."""
    open_frames: list[list] = []  # [depth, offset of its p:cNvPr or None, actions it has, whether inside p:cNvPr]
    found: list[tuple[int, set[int]] | None] = []
    depth = 0
    has = {f"{NS_A}{SEP}{local}": instance for instance, local in ACTIONS.items()}

    def start(tag: str, _: dict[str, str]) -> None:
        nonlocal depth
        depth += 1
        frame = open_frames[-1] if open_frames else None
        if tag == FRAME:
            open_frames.append([depth, None, set(), False])
        elif tag == objects.OLE_OBJ:
            found.append((frame[1], frame[2]) if frame is not None and frame[1] is not None else None)
        elif frame is None:
            return
        elif tag == PROPERTIES and depth == frame[0] + 2 and frame[1] is None:
            frame[1], frame[3] = reader.CurrentByteIndex, True
        elif tag in WRITTEN and frame[3]:
            frame[2].add(has[tag])

    def end(tag: str) -> None:
        nonlocal depth
        if open_frames and tag == PROPERTIES and depth == open_frames[-1][0] + 2:
            open_frames[-1][3] = False
        if open_frames and tag == FRAME and depth == open_frames[-1][0]:
            open_frames.pop()
        depth -= 1

    reader = ooxml.parser(name, Unreadable, start, end)
    ooxml.feed(reader, (data,), name, Unreadable)
    return found


def _with_actions(data: bytes, name: str, wanted: list[tuple[tuple[int, set[int]], dict[int, int]]]) \
        -> tuple[bytes, int]:
    """The slide ``data`` with each frame's ``p:cNvPr`` (``wanted``: where it is and the actions it has, the verbs
    to run by recInstance) given its actions, first among its children, every other byte as it was; and how many
    were written. Each new element declares the namespaces it uses."""
    out, done, count = [], 0, 0
    for (at, present), verbs in sorted(wanted, key=lambda item: item[0][0]):
        if present:
            continue  # a frame with an action of its own keeps it, and the schema's order, as it is
        added = "".join(f'<a:{ACTIONS[instance]} xmlns:a="{NS_A}" xmlns:r="{NS_R}" r:id="" '
                        f'action="ppaction://ole?verb={verbs[instance]}"/>' for instance in sorted(verbs)).encode()
        qualified, tag_end, _ = ooxml.start_tag(data, at, name)
        if tag_end.group().endswith(b"/>"):
            out += [data[done:tag_end.start()], b">", added, b"</" + qualified + b">"]
        else:
            out += [data[done:tag_end.end()], added]
        done = tag_end.end()
        count += len(verbs)
    return b"".join([*out, data[done:]]), count

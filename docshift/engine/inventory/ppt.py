"""The counts of a .ppt ([MS-PPT]): the live DocumentContainer of its "PowerPoint Document" stream and the slides,
masters and notes it lists. The persist directory finds them (2.1.2: Current User -> UserEditAtoms ->
PersistDirectoryAtoms -> DocumentContainer); it is rebuilt from all the stream's PersistDirectoryAtoms when that
chain is broken, as PowerPoint's repair does."""

import struct
import zlib
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import olefile

from docshift.engine.cfb import CompoundFile
from docshift.engine.inventory import officeart, ppt_persist, ppt_schemes, ppt_sounds, ppt_text_styles
from docshift.engine.inventory.common import (
    CLIP_ART,
    MAX_STREAM,
    Budget,
    Inventory,
    Palette,
    ThemeFont,
    Unreadable,
    characters,
    stream,
)

RT_DOCUMENT, RT_SLIDE, RT_SLIDE_ATOM, RT_NOTES, RT_MAIN_MASTER = 0x03E8, 0x03EE, 0x03EF, 0x03F0, 0x03F8
RT_SLIDE_LIST, RT_SLIDE_PERSIST, RT_DRAWING_GROUP, RT_DRAWING = 0x0FF0, 0x03F3, 0x040B, 0x040C
RT_EXOBJ_LIST, RT_EXEMBED, RT_EXOLEOBJ_ATOM, RT_CSTRING, RT_EXOBJ_REF = 0x0409, 0x0FCC, 0x0FC3, 0x0FBA, 0x0BC1
RT_TEXT_HEADER, RT_TEXT_CHARS, RT_TEXT_BYTES, RT_PLACEHOLDER, RT_COMMENT10 = 0x0F9F, 0x0FA0, 0x0FA8, 0x0BC3, 0x2EE0
RT_HEADERS_FOOTERS, RT_HEADERS_FOOTERS_ATOM, RT_BINARY_TAG_DATA = 0x0FD9, 0x0FDA, 0x138B
COMMENT_PATH = (0x1388, 0x138A, RT_BINARY_TAG_DATA)  # ProgTags -> ProgBinaryTag -> BinaryTagDataBlob -> Comment10
RT_EXOLEOBJ_STG, RT_ENVIRONMENT, RT_DOCUMENT_ATOM = 0x1011, 0x03F2, 0x03E9
MAX_INFLATED = 64 << 20  # of an object's storage, to see that it inflates
# fields in text: each stands on a "*" of the text atom (slide number, dates, header, footer)
RT_FIELDS = {0x0FD8, 0x0FF7, 0x0FF8, 0x0FF9, 0x0FFA, 0x1015}
PT_NOTES_BODY = 0x0C
SLIDE_MASTER_BACKGROUND = 0x0004  # SlideAtom.slideFlags.fMasterBackground
MASTER_PLACEHOLDERS = {0x07: "dt", 0x08: "sldNum", 0x09: "ftr"}  # PT_MasterDate, PT_MasterSlideNumber, PT_MasterFooter
HF_DATE, HF_TODAY, HF_SLIDE_NUMBER, HF_FOOTER = 0x01, 0x02, 0x08, 0x20


def _text(data: bytes | bytearray, start: int, end: int, budget: Budget) -> str:
    """The text of the text atoms among the records of ``data[start:end]`` (not descending), without the "*"
    that fields stand on."""
    parts: list[str] = []
    fields = 0
    for rec_type, _, _, body, stop in officeart.children(data, start, end, budget):
        if rec_type == RT_TEXT_CHARS:
            parts.append(bytes(data[body:stop]).decode("utf_16_le", "replace"))
        elif rec_type == RT_TEXT_BYTES:
            parts.append(bytes(data[body:stop]).decode("latin-1"))
        elif rec_type in RT_FIELDS:
            fields += 1
    text = "\n".join(parts)
    return text.replace("*", "", fields) if fields else text


def _shadowed(data: bytes | bytearray, start: int, end: int, budget: Budget) -> bool:
    """Whether the text records among ``data[start:end]`` (not descending) turn a text shadow on: a text's runs, a
    master's styles, the deck's default character formatting."""
    length = 0
    for rec_type, instance, _, body, stop in officeart.children(data, start, end, budget):
        if rec_type in (RT_TEXT_CHARS, RT_TEXT_BYTES):
            length = (stop - body) // (2 if rec_type == RT_TEXT_CHARS else 1)
        elif rec_type == RT_TEXT_HEADER:
            length = 0
        elif ppt_text_styles.shadowed(data, rec_type, instance, body, stop, length):
            return True
    return False


def _client(shape: officeart.Shape, data: bytes | bytearray, start: int, end: int, budget: Budget) -> None:
    """A shape's PowerPoint records: its text, placeholder type, OLE object reference and interactions."""
    shape.shadowed = _shadowed(data, start, end, budget)
    for rec_type, instance, _, body, stop in officeart.children(data, start, end, budget):
        if rec_type == RT_PLACEHOLDER and stop - body >= 5:
            shape.placeholder = data[body + 4]
        elif rec_type == RT_EXOBJ_REF and stop - body >= 4:
            shape.object_ref = struct.unpack_from("<I", data, body)[0]
        elif rec_type == ppt_sounds.RT_INTERACTIVE_INFO:  # instance 0: a click's, 1: the mouse passing over
            sound, action = ppt_sounds.interactive(data, body, stop, budget)
            shape.sound_ref = sound or shape.sound_ref
            if action is not None and instance in (0, 1):
                shape.actions[instance] = action
    shape.text += _text(data, start, end, budget)


class _Presentation:
    """The live objects of a "PowerPoint Document" stream, found through its persist directory."""

    def __init__(self, doc: bytes, current: bytes, budget: Budget) -> None:
        self.doc, self.budget = doc, budget
        doc_ref, self.directory, self.whole_chain = ppt_persist.directory(current, doc, budget)
        self.rescanned = False
        located = self.container(doc_ref, RT_DOCUMENT)
        if located is None:
            raise Unreadable("no DocumentContainer")
        self.document = located

    @classmethod
    def of_file(cls, path: str | Path) -> "_Presentation":
        """The live objects of the .ppt at ``path``, with a budget of their own; Unreadable when it holds no
        PowerPoint Document (PowerPoint 2 and 3 wrote no compound file: LibreOffice converts them all the same)."""
        if not olefile.isOleFile(str(path)):
            raise Unreadable("not a compound file")
        with CompoundFile(path) as ole:
            doc, current = stream(ole, "PowerPoint Document"), stream(ole, "Current User")
        if doc is None or current is None:
            raise Unreadable("no PowerPoint Document")
        return cls(doc, current, Budget())

    def container(self, ref: int, *expected: int) -> tuple[int, int] | None:
        """(body start, body end) of persist object ``ref`` if it is a record of one of the ``expected`` types.
        A reference the directory lacks makes it rebuilt once from the whole stream."""
        offset = self.directory.get(ref)
        if offset is None and not self.rescanned:
            self.rescanned = True
            self.directory = {**ppt_persist.rescan(self.doc, self.budget), **self.directory}
            offset = self.directory.get(ref)
        if offset is None or offset + 8 > len(self.doc):
            return None
        _, _, rec_type, body, stop = officeart.header(self.doc, offset)
        return (body, min(stop, len(self.doc))) if rec_type in expected else None

    def slide_containers(self) -> list[tuple[int, int] | None]:
        """(body start, body end) of each SlideContainer of the slide list, in its order; None where one is
        missing."""
        return [self.container(ref, RT_SLIDE) for ref, _ in self._listed(0)]

    def master_containers(self) -> dict[int, tuple[int, int]]:
        """{slideId: (body start, body end)} of each master of the master list: a MainMasterContainer, or the
        SlideContainer of a title master."""
        found = ((slide_id, self.container(ref, RT_MAIN_MASTER, RT_SLIDE)) for ref, slide_id in self._listed(1))
        return {slide_id: located for slide_id, located in found if located is not None}

    def transition(self, located: tuple[int, int] | None,
                   masters: dict[int, tuple[int, int]]) -> ppt_sounds.Transition:
        """The :class:`ppt_sounds.Transition` of the slide container ``located``: its own, else that of the master it
        uses (``masters``: ``master_containers``), else of that master's; a click's and no sound without any."""
        for _ in range(3):
            found = ppt_sounds.transition(self.doc, located, self.budget)
            if found is not None or located is None:
                break
            master_id = slide_atom(self.doc, located, self.budget)[0]
            located = None if master_id is None else masters.get(master_id)
        return found or ppt_sounds.Transition()

    def _listed(self, instance: int) -> list[tuple[int, int]]:
        """(persistIdRef, slideId) of each SlidePersistAtom of the SlideListWithText ``instance`` (0: slides,
        1: masters), in its order."""
        listed = []
        for rec_type, list_instance, _, body, stop in officeart.children(self.doc, *self.document, self.budget):
            if rec_type == RT_SLIDE_LIST and list_instance == instance:
                for child, _, _, child_body, child_stop in officeart.children(self.doc, body, stop, self.budget):
                    if child == RT_SLIDE_PERSIST and child_stop - child_body >= 16:
                        ref, _, _, slide_id = struct.unpack_from("<IIII", self.doc, child_body)
                        listed.append((ref, slide_id))
        return listed

    def shapes(self, located: tuple[int, int]) -> list[officeart.Shape]:
        """The shapes of the PPDrawing of a slide, master or notes container."""
        shapes = []
        for rec_type, _, _, body, stop in officeart.children(self.doc, *located, self.budget):
            if rec_type == RT_DRAWING:
                shapes += officeart.shapes(self.doc, body, stop, self.budget, client=_client)
        return shapes

    def headers_footers(self, start: int, end: int) -> set[str] | None:
        """The date, slide number and footer items a HeadersFootersContainer in ``doc[start:end]`` shows."""
        flags = None
        strings: dict[int, str] = {}
        for rec_type, instance, _, body, stop in officeart.children(self.doc, start, end, self.budget):
            if rec_type == RT_HEADERS_FOOTERS_ATOM and stop - body >= 4:
                flags = struct.unpack_from("<H", self.doc, body + 2)[0]
            elif rec_type == RT_CSTRING:
                strings[instance] = bytes(self.doc[body:stop]).decode("utf_16_le", "replace").strip()
        if flags is None:
            return None
        shown = set()
        if flags & HF_DATE and (flags & HF_TODAY or strings.get(0)):
            shown.add("dt")
        if flags & HF_SLIDE_NUMBER:
            shown.add("sldNum")
        if flags & HF_FOOTER and strings.get(2):
            shown.add("ftr")
        return shown


def read(ole: olefile.OleFileIO, inventory: Inventory, budget: Budget, path: str | Path) -> None:
    """Counts of a .ppt, from the live DocumentContainer and the slides, masters and notes it lists."""
    counts = inventory.counts
    doc = stream(ole, "PowerPoint Document")
    current = stream(ole, "Current User")
    if doc is None or current is None:
        return
    show = _Presentation(doc, current, budget)
    inventory.broken_chain = not show.whole_chain
    lists: dict[int, list[list[int]]] = {0: [], 2: []}  # slides, notes (the masters: show.master_containers)
    bstore: list[officeart.Entry] = []
    embeds: dict[int, str] = {}
    damaged: set[int] = set()  # embedded objects whose storage holds no compound file
    audio: dict[int, int] = {}  # exObjId: sound id, of the sound shapes' objects
    sounds: set[int] = set()
    played: set[int | None] = set()  # the sounds the slides play: transitions, clicks, animations, sound shapes
    slide_footers: set[str] = set()
    shadowed = False  # whether any text's formatting turns a shadow on
    fonts: list[ThemeFont | None] = []  # the deck's font collection
    for rec_type, instance, _, body, stop in officeart.children(doc, *show.document, budget):
        if rec_type in (RT_SLIDE_LIST, RT_ENVIRONMENT):
            shadowed = shadowed or _shadowed(doc, body, stop, budget)
        if rec_type == RT_ENVIRONMENT:
            fonts = ppt_schemes.font_collection(doc, body, stop, budget)
        if rec_type == RT_SLIDE_LIST and instance in lists:
            entries = lists[instance]
            for child, _, _, child_body, child_stop in officeart.children(doc, body, stop, budget):
                if child == RT_SLIDE_PERSIST and child_stop - child_body >= 16:
                    ref, _, _, slide_id = struct.unpack_from("<IIII", doc, child_body)
                    entries.append([ref, slide_id, child_stop, child_stop])
                elif entries:
                    entries[-1][3] = child_stop  # the text records of the slide run up to the next persist atom
        elif rec_type == RT_DRAWING_GROUP:
            bstore = officeart.bstore(doc, body, stop, budget)
        elif rec_type == RT_EXOBJ_LIST:
            embeds, damaged = _embeds(show, body, stop, budget)
            audio = ppt_sounds.audio_objects(doc, body, stop, budget)
        elif rec_type == ppt_sounds.RT_SOUND_COLLECTION:
            sounds = set(ppt_sounds.collection(doc, body, stop, budget, MAX_STREAM))
        elif rec_type == RT_HEADERS_FOOTERS and instance == 3:
            slide_footers = show.headers_footers(body, stop) or set()
        elif rec_type == RT_DOCUMENT_ATOM and stop - body >= 40:  # fOmitTitlePlace, fRightToLeft
            inventory.presentation = {key: value for key, value, flag in (
                ("showSpecialPlsOnTitleSld", "0", doc[body + 37]), ("rtl", "1", doc[body + 38])) if flag}
    # the masters: their placeholders (a date, slide number or footer shows only where the master has one)
    masters: dict[int | None, list[Any]] = {}
    palettes: dict[int | None, Palette | None] = {}  # {main master's id: its theme colours}, as the slides meet them
    master_containers = show.master_containers()
    for slide_id, master_at in master_containers.items():
        master_shapes = show.shapes(master_at)
        placeholders = {MASTER_PLACEHOLDERS[shape.placeholder] for shape in master_shapes
                        if shape.placeholder in MASTER_PLACEHOLDERS}
        masters[slide_id] = [master_shapes, placeholders, slide_atom(doc, master_at, budget)[0], False]
        shadowed = shadowed or _shadowed(doc, *master_at, budget) or any(shape.shadowed for shape in master_shapes)
    text: Counter[str] = Counter()
    shapes: list[officeart.Shape] = []
    footers: set[str] = set()
    comments, notes = 0, 0
    slides = 0
    acting: list[str] = []  # "slide n" once for each click or mouse-over that runs a macro or an object's verb
    for ref, _, text_start, text_end in lists[0]:
        located = show.container(ref, RT_SLIDE)
        if located is None:
            raise Unreadable("a slide of the slide list is missing")
        slides += 1
        slide_shapes = show.shapes(located)
        master_id, slide_flags = slide_atom(doc, located, budget)
        if slide_flags & SLIDE_MASTER_BACKGROUND:  # the slide shows its master's background, not its own
            slide_shapes = [shape for shape in slide_shapes if not shape.flags & officeart.FSP_BACKGROUND]
        shapes += slide_shapes
        shadowed = shadowed or any(shape.shadowed for shape in slide_shapes)
        transition = show.transition(located, master_containers)
        played.add(transition.sound)
        if transition.after is not None or not transition.click:
            inventory.advances[slides] = (transition.after, transition.click)
        if sounds - played:
            played.update(ppt_sounds.animation_sounds(doc, located, budget))
        for shape in slide_shapes:
            if not shape.flags & officeart.FSP_DELETED:
                played |= {shape.sound_ref, None if shape.object_ref is None else audio.get(shape.object_ref)}
                for action in shape.actions.values():
                    if action.startswith(ppt_sounds.RUN_MACRO):
                        inventory.macro_actions.append(f"slide {slides}")
                    elif shape.object_ref not in embeds or shape.object_ref in damaged:
                        continue  # a verb of a linked or damaged object: PowerPoint runs none either
                    acting.append(f"slide {slides}")
        text.update(characters(_text(doc, text_start, text_end, budget)
                                + "".join(shape.text for shape in slide_shapes)))
        own_footers = None
        for rec_type, _instance, _, body, stop in officeart.children(doc, *located, budget):
            if rec_type == RT_HEADERS_FOOTERS:
                own_footers = show.headers_footers(body, stop)
        master = masters.get(master_id)
        if master is not None:
            main_id = master[2] if master[2] in masters else master_id  # a title master's main master
            if isinstance(main_id, int) and main_id not in palettes:
                palettes[main_id] = ppt_schemes.palette(doc, master_containers[main_id], budget, fonts)
            if (palette := palettes.get(main_id)) is not None:
                inventory.palettes[slides] = palette
            footers |= (slide_footers if own_footers is None else own_footers) & master[1]
            master[3] = True
            if master[2] in masters:  # a title master uses a main master
                masters[master[2]][3] = True
        for rec_type, _, _, _, _, _ in officeart.walk(doc, *located, budget, into=(RT_BINARY_TAG_DATA,),
                                                      only=COMMENT_PATH):
            comments += rec_type == RT_COMMENT10
    counts["slides"] = slides
    inventory.shadows = shadowed
    inventory.text = text
    counts["characters"] = text.total()
    counts["comments"] = comments
    counts["headers_footers"] = len(footers)
    counts["sounds"] = len(played & sounds)
    counts["actions"], inventory.where["actions"] = len(acting), acting
    for master_shapes, _, _, used in masters.values():
        if used:  # pictures on masters no slide uses are not shown
            shapes += master_shapes
    for ref, _, text_start, text_end in lists[2]:
        located = show.container(ref, RT_NOTES)
        if located is None:
            continue
        note_shapes = show.shapes(located)
        shapes += note_shapes
        written = _text(doc, text_start, text_end, budget)
        written += "".join(s.text for s in note_shapes if s.placeholder == PT_NOTES_BODY)
        notes += bool(characters(written))
    counts["notes"] = notes
    used = {shape.object_ref for shape in shapes
            if shape.object_ref is not None and not shape.flags & officeart.FSP_DELETED}
    counts["embedded_objects"] = sum(1 for ident in embeds if ident in used and ident not in damaged)
    # a damaged object shows its replacement picture, and nothing more, in PowerPoint as in the result
    shapes = [replace(shape, flags=shape.flags & ~officeart.FSP_OLE) if shape.object_ref in damaged else shape
              for shape in shapes]
    size = ole.get_size("Pictures") if ole.exists("Pictures") else 0
    counts["images"] = len(officeart.pictures(shapes, bstore, lambda entry: entry[3] or entry[1] < size))


def slide_atom(doc: bytes, located: tuple[int, int], budget: Budget) -> tuple[int | None, int]:
    """(masterIdRef, slideFlags) of the SlideAtom of a slide (or title master) container, or (None, 0)."""
    for rec_type, _, _, body, stop in officeart.children(doc, *located, budget):
        if rec_type == RT_SLIDE_ATOM and stop - body >= 22:
            master, flags = struct.unpack_from("<I4xH", doc, body + 12)
            return master, flags
    return None, 0


def _embeds(show: _Presentation, start: int, end: int, budget: Budget) -> tuple[dict[int, str], set[int]]:
    """{exObjId: progId} of the embedded (not linked) OLE objects of the ExObjList, but clip art (``CLIP_ART``),
    and the exObjIds of those whose storage is damaged (``_whole``)."""
    doc, embeds, damaged = show.doc, {}, set()
    for rec_type, _, _, body, stop in officeart.children(doc, start, end, budget):
        if rec_type != RT_EXEMBED:
            continue
        kind, ident, prog, persist = None, None, "", None
        for atom, instance, _, atom_body, atom_stop in officeart.children(doc, body, stop, budget):
            if atom == RT_EXOLEOBJ_ATOM and atom_stop - atom_body >= 24:
                _, kind, ident, _, persist = struct.unpack_from("<IIIII", doc, atom_body)
            elif atom == RT_CSTRING and instance == 2:
                prog = bytes(doc[atom_body:atom_stop]).decode("utf_16_le", "replace")
        if ident is not None and kind == 0 and not prog.startswith(CLIP_ART):
            embeds[ident] = prog
            if persist is None or not _whole(show, persist):
                damaged.add(ident)
    return embeds, damaged


def object_storage(show: _Presentation, persist: int) -> tuple[bytes, bool] | None:
    """The body of the ExOleObjStg record ``persist`` and whether it is compressed (recInstance 1: the size of the
    storage, then its zlib stream), or None where there is none."""
    located = show.container(persist, RT_EXOLEOBJ_STG)
    if located is None:
        return None
    return show.doc[located[0]:located[1]], officeart.header(show.doc, located[0] - 8)[1] == 1


def _whole(show: _Presentation, persist: int) -> bool:
    """Whether the ExOleObjStg record ``persist`` holds a compound file, its zlib stream (when compressed)
    inflating to the end without an error. PowerPoint opens no other: it shows the object's replacement
    picture, as LibreOffice's result does. Inflated a megabyte at a time and let go, as far as the size it gives
    (at most ``MAX_INFLATED``: what lies beyond is taken as whole)."""
    stored = object_storage(show, persist)
    if stored is None:
        return False
    body, compressed = stored
    if not compressed:
        return body.startswith(olefile.MAGIC)
    if len(body) < 4:
        return False
    left = min(struct.unpack_from("<I", body)[0], MAX_INFLATED)
    inflater, head, pending = zlib.decompressobj(), b"", body[4:]
    try:
        while pending and left > 0:
            chunk = inflater.decompress(pending, 1 << 20)
            head, pending, left = head + chunk[:8 - len(head)], inflater.unconsumed_tail, left - len(chunk)
    except zlib.error:
        return False
    return head.startswith(olefile.MAGIC)

"""The sounds of a .ppt: its SoundCollection, and which of its sounds the slides play.

The document's SoundCollection holds each sound once: a SoundContainer with its file name, its id and its data
([MS-PPT] 2.4.16). A slide's transition plays one by that id (its SSSlideInfoAtom, with fSound), a shape's click
action too (its InteractiveInfoAtom), and so does an animation's effect (a VisualSoundAtom in the slide's timing, as
PowerPoint 2002 and later and LibreOffice write it; the AnimationInfoAtom of PowerPoint 97's effects is not read); a
sound shape shows an ExWAVAudioEmbedded object of the ExObjList, which names the sound by its id.
"""

import posixpath
import struct
from dataclasses import dataclass
from typing import NamedTuple

from docshift.engine.inventory import officeart
from docshift.engine.inventory.common import Budget

RT_SOUND_COLLECTION, RT_SOUND, RT_SOUND_DATA, RT_CSTRING = 0x07E4, 0x07E6, 0x07E7, 0x0FBA
RT_SLIDE_INFO, RT_INTERACTIVE_INFO, RT_INTERACTIVE_INFO_ATOM = 0x03F9, 0x0FF2, 0x0FF3
RT_AUDIO_EMBEDDED, RT_MEDIA_ATOM, RT_AUDIO_EMBEDDED_ATOM = 0x100F, 0x1004, 0x1013
SOUND, LOOP = 0x0010, 0x0040  # SSSlideInfoAtom's fSound and fLoopSound
CLICK, AUTO = 0x0001, 0x0400  # and its fManualAdvance and fAutoAdvance
RT_BINARY_TAG_DATA, RT_VISUAL_SHAPE_ATOM = 0x138B, 0x2AFB
SOUND_TYPE = 2  # a VisualShapeAtom's refType for a sound (a VisualSoundAtom)
# InteractiveInfoAtom.action: II_MacroAction, run a macro the MacroNameAtom (a CString of recInstance 2) names;
# II_OLEAction, run one of an embedded object's verbs; and how a .pptx writes each
ACTION_MACRO, ACTION_OLE, MACRO_NAME = 1, 5, 2
RUN_MACRO, OLE_VERB = "ppaction://macro?name=", "ppaction://ole?verb="


@dataclass
class Sound:
    """One sound of the SoundCollection: its file name and its data."""
    name: str
    data: bytes

    @property
    def extension(self) -> str:
        suffix = posixpath.splitext(self.name)[1][1:].lower()
        return suffix if suffix.isalnum() and len(suffix) <= 5 else "wav"


def collection(doc: bytes, start: int, end: int, budget: Budget, room: int) -> dict[int, Sound]:
    """{sound id: sound} of the SoundCollection whose body is ``doc[start:end]``, as long as their data fit in
    ``room`` bytes together."""
    sounds: dict[int, Sound] = {}
    for rec_type, _, _, body, stop in officeart.children(doc, start, end, budget):
        if rec_type != RT_SOUND:
            continue
        strings: dict[int, str] = {}
        data = None
        for child, instance, _, child_body, child_stop in officeart.children(doc, body, stop, budget):
            if child == RT_CSTRING:
                strings[instance] = bytes(doc[child_body:child_stop]).decode("utf_16_le", "replace").strip("\x00")
            elif child == RT_SOUND_DATA:
                data = bytes(doc[child_body:child_stop])
        name = posixpath.basename(strings.get(0, "").replace("\\", "/"))
        if not name and strings.get(2, "").isdigit():  # Aspose.Slides names none: its extension and id name it
            name = f"sound{strings[2]}.{strings.get(1, '').lstrip('.') or 'wav'}"
        if strings.get(2, "").isdigit() and name and data is not None and len(data) <= room:
            sounds[int(strings[2])] = Sound(name, data)
            room -= len(data)
    return sounds


class Transition(NamedTuple):
    """What a slide's SlideShowSlideInfoAtom says besides its effect: the id of the sound its transition plays (None:
    none) and whether it loops; after how many milliseconds (its slideTime) the show moves on by itself (None: it
    waits), and whether a click moves it on."""
    sound: int | None = None
    loops: bool = False
    after: int | None = None
    click: bool = True


def transition(doc: bytes, located: tuple[int, int] | None, budget: Budget) -> Transition | None:
    """The :class:`Transition` of the slide or master container ``located``; None when it has no
    SlideShowSlideInfoAtom: a slide then has its master's transition, as LibreOffice imports it (a deck of the
    corpus gives 12 of its 91 slides their sound so)."""
    for rec_type, _, _, body, stop in officeart.children(doc, *located, budget) if located else ():
        if rec_type == RT_SLIDE_INFO and stop - body >= 12:
            slide_time, sound_ref = struct.unpack_from("<iI", doc, body)
            flags = struct.unpack_from("<H", doc, body + 10)[0]
            return Transition(sound_ref if flags & SOUND else None, bool(flags & LOOP),
                              max(slide_time, 0) if flags & AUTO else None, bool(flags & CLICK))
    return None


def audio_objects(doc: bytes, start: int, end: int, budget: Budget) -> dict[int, int]:
    """{exObjId: sound id} of the embedded sounds (ExWAVAudioEmbedded) of the ExObjList at ``doc[start:end]``."""
    found = {}
    for rec_type, _, _, body, stop in officeart.children(doc, start, end, budget):
        if rec_type != RT_AUDIO_EMBEDDED:
            continue
        ident = sound = None
        for child, _, _, child_body, child_stop in officeart.children(doc, body, stop, budget):
            if child == RT_MEDIA_ATOM and child_stop - child_body >= 4:
                ident = struct.unpack_from("<I", doc, child_body)[0]
            elif child == RT_AUDIO_EMBEDDED_ATOM and child_stop - child_body >= 4:
                sound = struct.unpack_from("<I", doc, child_body)[0]
        if ident is not None and sound is not None:
            found[ident] = sound
    return found


def interactive(data: bytes | bytearray, start: int, end: int, budget: Budget) -> tuple[int | None, str | None]:
    """(the sound id a shape's InteractiveInfoInstance at ``data[start:end]`` plays, or None; the action it runs
    that a .pptx writes as one of its own, or None): its InteractiveInfoAtom's soundIdRef ([MS-PPT] 2.6.10), and
    for II_OLEAction its oleVerb (``ppaction://ole?verb=n``), for II_MacroAction the macro its MacroNameAtom names
    (``ppaction://macro?name=...``)."""
    sound, action, verb, macro = None, None, 0, ""
    for rec_type, instance, _, body, stop in officeart.children(data, start, end, budget):
        if rec_type == RT_INTERACTIVE_INFO_ATOM and stop - body >= 4 and action is None:
            sound = struct.unpack_from("<I", data, body)[0] or None
            action, verb = (data[body + 8], data[body + 9]) if stop - body >= 10 else (0, 0)
        elif rec_type == RT_CSTRING and instance == MACRO_NAME:
            macro = bytes(data[body:stop]).decode("utf_16_le", "replace").strip("\x00")
    if action == ACTION_OLE:
        return sound, f"{OLE_VERB}{verb}"
    return sound, f"{RUN_MACRO}{macro}" if action == ACTION_MACRO and macro else None


def animation_sounds(doc: bytes, located: tuple[int, int] | None, budget: Budget) -> list[int]:
    """The ids of the sounds that the animation effects of the slide container ``located`` play, in the order of its
    timing (its VisualSoundAtoms, [MS-PPT] 2.8.48)."""
    timed: list[int] = []
    for rec_type, _, _, body, stop, _ in officeart.walk(doc, *located, budget, into=(RT_BINARY_TAG_DATA,)) \
            if located else ():
        if rec_type == RT_VISUAL_SHAPE_ATOM and stop - body >= 12:
            ref_type, sound_ref = struct.unpack_from("<II", doc, body + 4)
            if ref_type == SOUND_TYPE:
                timed.append(sound_ref)
    return timed

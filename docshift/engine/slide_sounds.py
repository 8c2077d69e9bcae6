"""Sounds of a .ppt, kept in its .pptx as PowerPoint keeps them: inside the package.

The .ppt holds each sound once, in the document's SoundCollection: a SoundContainer with its file name, its id
and its data ([MS-PPT] 2.4.16). A slide's transition names one by that id (its SSSlideInfoAtom, with fSound), and
so do a sound shape and a click action. LibreOffice's import writes each sound into its user gallery, registers it
there, and takes a later file's sound of the same name from the gallery instead of that file's own: every child of
a parent shares one profile, so an account's sound reached the next account's result. The gallery now lies where
nothing can be written (``profile.PROFILE_SETTINGS``), and LibreOffice's export then keeps no sound of its own: a
transition's goes, and a sound shape links outside the package to the bare file name (before, to the sound's path
in the sandbox's gallery, which no customer has).

``mend`` puts each sound back from the legacy file as PowerPoint writes it: one media part per sound; a link to the
sound's name outside the package points at that part instead, ``p14:media`` embedding it; and a slide whose
transition plays a sound gets its ``p:sndAc`` again.
"""

import posixpath
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import unquote
from xml.dom import minidom

from docshift.engine import ooxml
from docshift.engine.embedding import (
    MAX_OBJECTS,
    REL_NS,
    content_types,
    free_name,
    guarded,
    part_bytes,
    read_part,
    relate,
    spliced,
)
from docshift.engine.inventory import officeart, ppt_sounds
from docshift.engine.inventory.common import Unreadable
from docshift.engine.inventory.package import NS_A, NS_P, NS_R, SEP, Package, relationships_part
from docshift.engine.inventory.ppt import _Presentation
from docshift.engine.inventory.ppt_sounds import Sound
from docshift.engine.objects import slide_parts

AUDIO = f"{ooxml.RELATIONSHIPS}/audio"
NS_P14 = "http://schemas.microsoft.com/office/powerpoint/2010/main"
CONTENT_TYPES = {"wav": "audio/wav", "mid": "audio/midi", "midi": "audio/midi", "mp3": "audio/mpeg",
                 "wma": "audio/x-ms-wma", "aif": "audio/x-aiff", "aiff": "audio/x-aiff", "au": "audio/basic"}
# where p:sndAc goes in a p:transition: after the effect, before the extension list
AFTER_SOUND = {"extLst"}


def mend(result: Path, source: Path, kind: str) -> int:
    """Put the sounds of the .ppt ``source`` back into ``result``, LibreOffice's export of it. Returns how many
    places (links, transitions) now play the file's own sound from the package (0: the file is untouched).
    Never raises for what the files hold: a part that does not read leaves the file as it was."""
    if kind != "ppt":
        return 0
    return guarded(_mend, result, source, "the sounds of %s stay as LibreOffice wrote them: %r")


def _mend(result: Path, source: Path) -> int:
    sounds, transitions = _source_sounds(source)
    if not sounds:
        return 0
    by_name = {sound.name.lower(): sound for sound in sounds.values()}
    with zipfile.ZipFile(result) as zf:
        package = Package(zf)
        slides = slide_parts(package)
        if len(slides) != len(transitions):
            return 0  # the slides do not pair up (the content check refuses such a result)
        lower = {name.lower() for name in package.names}
        parts: dict[str, str] = {}  # a sound's name (lower case): the media part that holds it
        added: dict[str, bytes] = {}
        edits: dict[str, bytes] = {}
        mended = 0

        def part(sound: Sound) -> str:
            if sound.name.lower() not in parts:
                name = free_name(lower, "ppt/media/media{}." + sound.extension)
                added[name] = sound.data
                parts[sound.name.lower()] = name
            return parts[sound.name.lower()]

        for slide, (sound_id, loop, animated) in zip(slides, transitions):
            rels_part = relationships_part(slide)
            if rels_part not in package.names:
                continue
            rels = read_part(package, rels_part)
            linked = [(rel, sound) for rel in rels.getElementsByTagNameNS(REL_NS, "Relationship")
                      if rel.getAttribute("TargetMode") == "External"
                      and (sound := by_name.get(posixpath.basename(unquote(rel.getAttribute("Target"))).lower()))]
            if not linked and sound_id not in sounds and not animated:
                continue  # nothing of this slide plays a sound of the file: its XML is not read
            effects, transition = (False, False) if linked else _wanted(package, slide, sounds, sound_id, animated)
            if not linked and not effects and not transition:
                continue  # LibreOffice's export already plays them: its XML is not parsed into a DOM
            if not linked and not effects:  # the transition's sound alone: written into the slide's bytes
                sound = sounds[sound_id]  # type: ignore[index]  # _wanted: the transition plays one of the file
                rid = relate(rels, "../media/" + posixpath.basename(part(sound)), AUDIO)
                edits[slide] = _with_transition_sound(part_bytes(package, slide), slide, rid, sound.name, loop)
                edits[rels_part] = ooxml.serialize(rels)
                mended += 1
                continue
            doc = read_part(package, slide)
            changed = 0
            targets = list(doc.getElementsByTagNameNS(NS_P, "sndTgt"))
            if len(targets) == len(animated):  # the effects' sounds, in the order of the timing on both sides
                for target, animated_id in zip(targets, animated):
                    if animated_id in sounds and not target.getAttributeNS(NS_R, "embed"):
                        sound = sounds[animated_id]
                        target.setAttributeNS(NS_R, "r:embed", relate(rels, "../media/" + posixpath.basename(part(
                            sound)), AUDIO))
                        target.setAttribute("name", sound.name)
                        changed += 1
            for rel, sound in linked:
                rel.removeAttribute("TargetMode")
                rel.setAttribute("Target", "../media/" + posixpath.basename(part(sound)))
                if rel.getAttribute("Type") == ooxml.HYPERLINK:  # LibreOffice's click on a sound: a link to its file
                    rel.setAttribute("Type", AUDIO)
                    _click_sound(doc, rel.getAttribute("Id"), sound.name)
                else:
                    _embedded(doc, rel.getAttribute("Id"))
                changed += 1
            if sound_id in sounds and not doc.getElementsByTagNameNS(NS_P, "sndAc"):
                sound = sounds[sound_id]
                rid = relate(rels, "../media/" + posixpath.basename(part(sound)), AUDIO)
                _transition_sound(doc, rid, sound.name, loop)
                changed += 1
            if changed:
                edits[slide], edits[rels_part] = ooxml.serialize(doc), ooxml.serialize(rels)
                mended += changed
        if not mended:
            return 0
        if added:
            edits["[Content_Types].xml"] = content_types(
                read_part(package, "[Content_Types].xml"), added, set(),
                lambda name: CONTENT_TYPES.get(name.rsplit(".", 1)[-1], "application/octet-stream"))
        ooxml.rewrite(zf, result, edits, added)
    return mended


def _wanted(package: Package, slide: str, sounds: dict[int, Sound], sound_id: int | None,
            animated: list[int]) -> tuple[bool, bool]:
    """What of ``slide`` the loop above fills, read as a stream: (an effect's ``p:sndTgt`` without the sound its
    legacy effect plays, no ``p:sndAc`` where its legacy transition plays one). A DOM of a large slide costs a
    hundred times what the stream does (a deck of the corpus: 466 ms, for nothing to mend)."""
    embeds: list[str] = []
    actions = []
    target, action, embed = f"{NS_P}{SEP}sndTgt", f"{NS_P}{SEP}sndAc", f"{NS_R}{SEP}embed"

    def start(tag: str, attributes: dict[str, str]) -> None:
        if tag == target:
            embeds.append(attributes.get(embed, ""))
        elif tag == action:
            actions.append(tag)

    package.parse(slide, start)
    effects = len(embeds) == len(animated) and any(
        animated_id in sounds and not embedded for animated_id, embedded in zip(animated, embeds, strict=True))
    return effects, sound_id in sounds and not actions


def _with_transition_sound(data: bytes, name: str, rid: str, sound: str, loop: bool) -> bytes:
    """The slide ``data`` (part ``name``) in which each p:transition plays sound ``rid`` at its start (a new
    p:transition if it has none), written into its bytes: what ``_transition_sound`` does to a DOM, in a fraction
    of the time (a deck of the corpus with a sound on each of its 78 slides: 1.4 s as DOMs), every other byte as
    it was. The new elements take the root's prefixes, or declare their own where the root binds none."""
    transition, root_children = f"{NS_P}{SEP}transition", ("timing", "extLst")
    declared: dict[str, str] = {}  # prefix: namespace, on the root
    rebound: set[str] = set()  # prefixes declared again below it
    depth = 0
    found: list[list[Any]] = []  # [its start, its depth, where the sound goes: before a child or its end tag]
    root: dict[str, int] = {}  # "start", "before": its first p:timing or p:extLst, "end": its end tag

    def namespace(prefix: str | None, uri: str) -> None:
        if depth:
            rebound.add(prefix or "")
        else:
            declared.setdefault(prefix or "", uri)

    def start(tag: str, _: dict[str, str]) -> None:
        nonlocal depth
        depth += 1
        at, local = reader.CurrentByteIndex, tag.rpartition(SEP)[2]
        if depth == 1:
            root["start"] = at
        elif depth == 2 and local in root_children:
            root.setdefault("before", at)
        if tag == transition:
            found.append([at, depth, None])
        elif found and found[-1][1] == depth - 1 and found[-1][2] is None and local in AFTER_SOUND:
            found[-1][2] = at

    def end(tag: str) -> None:
        nonlocal depth
        if tag == transition and found[-1][2] is None:
            found[-1][2] = reader.CurrentByteIndex
        if depth == 1:
            root["end"] = reader.CurrentByteIndex
        depth -= 1

    reader = ooxml.parser(name, Unreadable, start, end)
    reader.StartNamespaceDeclHandler = namespace
    ooxml.feed(reader, (data,), name, Unreadable)
    root_name = ooxml.start_tag(data, root["start"], name)[0].decode()
    p = root_name.partition(":")[0] if ":" in root_name else ""
    r = next((prefix for prefix, uri in declared.items() if uri == NS_R and prefix), "")
    own = not p or declared.get(p) != NS_P or not r or {p, r} & rebound
    p, r = ("p", "r") if own else (p, r)
    declarations = f' xmlns:{p}="{NS_P}" xmlns:{r}="{NS_R}"' if own else ""
    looped = ' loop="1"' if loop else ""
    played = (f'<{p}:stSnd{looped}><{p}:snd {r}:embed="{ooxml.attribute_value(rid)}" '
              f'name="{ooxml.attribute_value(sound)}"/></{p}:stSnd></{p}:sndAc>')
    edits: list[tuple[int, int, str]] = []  # (from, to, written instead)
    for at, _, before in found:
        qualified, tag_end, _ = ooxml.start_tag(data, at, name)
        if tag_end.group().endswith(b"/>"):
            edits.append((tag_end.start(), tag_end.end(), f"><{p}:sndAc{declarations}>{played}</{qualified.decode()}>"))
        else:
            edits.append((before, before, f"<{p}:sndAc{declarations}>{played}"))
    if not found:
        place = root.get("before", root["end"])
        edits.append((place, place, f"<{p}:transition{declarations}><{p}:sndAc>{played}</{p}:transition>"))
    return spliced(data, [(start, end, written.encode()) for start, end, written in edits])


def _source_sounds(source: Path) -> tuple[dict[int, Sound], list[tuple[int | None, bool, list[int]]]]:
    """({sound id: sound} of the SoundCollection, [(the id of the sound its transition plays or None, whether it
    loops, the ids of those its animations play)] per slide, in slide order); ({}, []) when the file holds no
    sound."""
    show = _Presentation.of_file(source)
    sounds: dict[int, Sound] = {}
    for rec_type, _, _, body, stop in officeart.children(show.doc, *show.document, show.budget):
        if rec_type == ppt_sounds.RT_SOUND_COLLECTION:
            sounds = ppt_sounds.collection(show.doc, body, stop, show.budget, MAX_OBJECTS)
    if not sounds:
        return {}, []
    masters = show.master_containers()
    slides = []
    for located in show.slide_containers():
        transition = show.transition(located, masters)
        slides.append((transition.sound, transition.loops, ppt_sounds.animation_sounds(show.doc, located, show.budget)))
    return sounds, slides


def _embedded(doc: minidom.Document, rid: str) -> None:
    """The p14:media linking relationship ``rid`` embeds it instead, as PowerPoint writes a sound in the package."""
    for media in doc.getElementsByTagNameNS(NS_P14, "media"):
        if media.getAttributeNS(NS_R, "link") == rid:
            media.removeAttributeNS(NS_R, "link")
            media.setAttributeNS(NS_R, "r:embed", rid)


def _click_sound(doc: minidom.Document, rid: str, name: str) -> None:
    """A shape's click that followed link ``rid`` to the sound's file plays sound ``rid`` instead, as PowerPoint
    writes a click's "play sound": no link and no other action (``ppaction://noaction``), an ``a:snd`` first."""
    for click in doc.getElementsByTagNameNS(NS_A, "hlinkClick"):
        if click.getAttributeNS(NS_R, "id") != rid:
            continue
        click.setAttributeNS(NS_R, "r:id", "")
        if not click.getAttribute("action"):
            click.setAttribute("action", "ppaction://noaction")
        played = doc.createElementNS(NS_A, "a:snd")
        played.setAttributeNS(NS_R, "r:embed", rid)
        played.setAttribute("name", name)
        click.insertBefore(played, click.firstChild)


def _transition_sound(doc: minidom.Document, rid: str, name: str, loop: bool) -> None:
    """Each p:transition of the slide plays sound ``rid`` at its start (a new p:transition if it has none)."""
    transitions = list(doc.getElementsByTagNameNS(NS_P, "transition"))
    if not transitions:
        root: Any = doc.documentElement
        transition = doc.createElementNS(NS_P, "p:transition")
        later = [child for child in root.childNodes if child.localName in ("timing", "extLst")]
        root.insertBefore(transition, later[0] if later else None)
        transitions = [transition]
    for transition in transitions:
        action = doc.createElementNS(NS_P, "p:sndAc")
        start = action.appendChild(doc.createElementNS(NS_P, "p:stSnd"))
        if loop:
            start.setAttribute("loop", "1")
        played = start.appendChild(doc.createElementNS(NS_P, "p:snd"))
        played.setAttributeNS(NS_R, "r:embed", rid)
        played.setAttribute("name", name)
        later = [child for child in transition.childNodes if child.localName in AFTER_SOUND]
        transition.insertBefore(action, later[0] if later else None)

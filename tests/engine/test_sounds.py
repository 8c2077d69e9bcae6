"""A presentation's sounds stay in its .pptx (``docshift/engine/slide_sounds.py``): LibreOffice's gallery, where its
import put them, is shut (tests/engine/test_tenants.py), and the sounds come back from the legacy file's
SoundCollection, as PowerPoint keeps them: inside the package."""

import re
import shutil
import zipfile

import olefile
import pptx
import pytest
from conftest import ROOT, sound_deck
from conftest import _soffice_save as soffice

from docshift.engine import convert, inventory, objects, slide_sounds
from docshift.engine.inventory import officeart, ppt_sounds
from docshift.engine.inventory.common import Budget
from docshift.engine.inventory.ppt import _Presentation
from docshift.engine.slide_sounds import _source_sounds

CORPUS = ROOT.parent / "shared" / "corpus"
AUDIO = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/audio"
MEDIA = "http://schemas.microsoft.com/office/2007/relationships/media"


# a name no other deck of the suite gives a sound: the plain soffice below, in the profile the suite's soffice runs
# share, would play another deck's sound of the same name from that profile's gallery
NAME = "test-sounds-chime.wav"


@pytest.fixture(scope="module")
def deck(tmp_path_factory):
    return sound_deck(tmp_path_factory.mktemp("sound-deck"), NAME, 523)


def relationships(package, part):
    """[(Id, Type, Target, TargetMode)] of ``part``'s relationships."""
    rels = package.read(re.sub(r"([^/]+)$", r"_rels/\1.rels", part)).decode()
    return [(rel.group(1), rel.group(2), rel.group(3), rel.group(4))
            for rel in re.finditer(r'<Relationship Id="([^"]+)" Type="([^"]+)" Target="([^"]+)"'
                                   r'(?: TargetMode="([^"]+)")?', rels)]


def plays(package, rid, sound, part="ppt/slides/slide1.xml"):
    """Whether relationship ``rid`` of ``part`` is an audio one inside the package, to a part holding ``sound``."""
    (target,) = [target for found, kind, target, mode in relationships(package, part)
                 if found == rid and kind == AUDIO and mode is None]
    return package.read("ppt/" + target.removeprefix("../")) == sound


def complete_and_opens(converted, tmp_path):
    """The report is complete, one sound on each side; python-pptx and LibreOffice open the result."""
    assert converted.fidelity["complete"], converted.fidelity
    assert converted.fidelity["counts"]["sounds"] == {"source": 1, "result": 1}
    assert len(pptx.Presentation(str(converted.path)).slides) == 1
    again = soffice(converted.path, "odp", tmp_path / "again")
    with zipfile.ZipFile(again) as odp:
        assert odp.read("content.xml").count(b"<draw:page ") == 1


def test_a_transition_sound_plays_from_the_package_as_the_file_made_it(deck, office, tmp_path):
    """The slide's transition plays the sound the .ppt holds, byte for byte, from a media part of the package, as a
    plain soffice's .pptx does (it read the sound back from its own gallery); python-pptx and LibreOffice open it."""
    path, sound = deck
    converted = convert.convert(office, path, "ppt", tmp_path / "ours", 60)
    with zipfile.ZipFile(converted.path) as package:
        slide = package.read("ppt/slides/slide1.xml").decode()
        played = re.search(f'<p:sndAc><p:stSnd><p:snd r:embed="([^"]+)" name="{NAME}"/></p:stSnd></p:sndAc>', slide)
        assert played, slide
        assert plays(package, played.group(1), sound)
        assert 'ContentType="audio/wav"' in package.read("[Content_Types].xml").decode()
    plain = soffice(path, "pptx", tmp_path / "plain")
    with zipfile.ZipFile(plain) as package:
        assert [package.read(name) for name in package.namelist() if name.endswith(".wav")] == [sound]
    complete_and_opens(converted, tmp_path)


def test_a_click_plays_its_sound_from_the_package_not_from_a_link_to_a_file(office, tmp_path):
    """A shape that plays a sound when clicked: a plain soffice's .pptx holds no sound for it, its click opens the
    sound's file in that profile's gallery (a path of its machine); docshift's plays the .ppt's own sound, byte for
    byte, from a media part, as PowerPoint writes it (``a:snd`` in an ``a:hlinkClick`` with no other action)."""
    name = "test-sounds-click.wav"
    path, sound = sound_deck(tmp_path / "deck", name, 659, plays="click")
    plain = soffice(path, "pptx", tmp_path / "plain")
    with zipfile.ZipFile(plain) as package:
        assert [(kind.rsplit("/", 1)[1], target.split(":")[0], mode) for _, kind, target, mode in
                relationships(package, "ppt/slides/slide1.xml") if target.endswith(name)] == \
            [("hyperlink", "file", "External")]
        assert [name for name in package.namelist() if package.read(name) == sound] == []
    converted = convert.convert(office, path, "ppt", tmp_path / "ours", 60)
    with zipfile.ZipFile(converted.path) as package:
        slide = package.read("ppt/slides/slide1.xml").decode()
        click = re.search(f'<a:hlinkClick r:id="" action="ppaction://noaction"><a:snd r:embed="([^"]+)" name="{name}"/>'
                          '</a:hlinkClick>', slide)
        assert click, slide
        assert plays(package, click.group(1), sound)
    complete_and_opens(converted, tmp_path)


def test_an_effect_plays_its_sound_from_the_package(office, tmp_path):
    """A shape's entrance effect that plays a sound (a VisualSoundAtom in the slide's timing): LibreOffice's export,
    its gallery shut, names no sound in the effect's ``p:sndTgt``; docshift's names a media part holding the .ppt's
    own sound, byte for byte, as a plain soffice (which reads it back from its profile's gallery) and PowerPoint
    do. The report counted no sound before: nothing else of the slide plays one."""
    name = "test-sounds-effect.wav"
    path, sound = sound_deck(tmp_path / "deck", name, 784, plays="effect")
    assert inventory.of_source(path, "ppt").counts["sounds"] == 1
    plain = soffice(path, "pptx", tmp_path / "plain")
    converted = convert.convert(office, path, "ppt", tmp_path / "ours", 60)
    for result in (plain, converted.path):
        with zipfile.ZipFile(result) as package:
            slide = package.read("ppt/slides/slide1.xml").decode()
            (target,) = re.findall(r"<p:sndTgt [^>]*>", slide)
            assert f'name="{name}"' in target
            assert plays(package, re.search(r'r:embed="([^"]+)"', target).group(1), sound)
    complete_and_opens(converted, tmp_path)


def test_a_slide_whose_sounds_are_in_place_is_read_as_a_stream_only(office, tmp_path, monkeypatch):
    """Mending a result whose effect already plays its sound from the package (the deck converted once) changes
    nothing, and reads the slide as a stream: its DOM, which costs a large slide a hundred times more, is built only
    where a sound is to be put back."""
    path, _ = sound_deck(tmp_path / "deck", "test-sounds-in-place.wav", 659, plays="effect")
    converted = convert.convert(office, path, "ppt", tmp_path / "ours", 60)
    before = converted.path.read_bytes()
    parsed = []
    real = slide_sounds.read_part
    monkeypatch.setattr(slide_sounds, "read_part", lambda package, part: parsed.append(part) or real(package, part))
    assert slide_sounds.mend(converted.path, path, "ppt") == 0
    assert converted.path.read_bytes() == before
    assert "ppt/slides/slide1.xml" not in parsed, parsed


def test_a_sound_shape_links_into_the_package_not_to_a_path_of_the_sandbox(office, tmp_path):
    """``sound.ppt`` of the corpus has a sound on its slide. LibreOffice linked it outside the package, to its file
    in the sandbox's gallery (``file:///profile/user/gallery/ringin.wav``), which no customer has; both its links
    now name a media part that holds the legacy file's sound, and ``p14:media`` embeds it."""
    source = CORPUS / "ppt" / "sound.ppt"
    (sound,) = _source_sounds(source)[0].values()
    converted = convert.convert(office, source, "ppt", tmp_path, 60)
    with zipfile.ZipFile(converted.path) as package:
        rels = relationships(package, "ppt/slides/slide1.xml")
        assert [mode for *_, mode in rels] == [None] * len(rels), rels
        media = {rid: target for rid, kind, target, _ in rels if kind in (AUDIO, MEDIA)}
        assert len(media) == 2 and len(set(media.values())) == 1
        assert package.read("ppt/" + next(iter(media.values())).removeprefix("../")) == sound.data
        slide = package.read("ppt/slides/slide1.xml").decode()
        assert re.search(r'<a:audioFile r:link="(rId\d+)"/>', slide).group(1) in media
        assert re.search(r'<p14:media r:embed="(rId\d+)"/>', slide).group(1) in media
    assert len(pptx.Presentation(str(converted.path)).slides) == 1
    assert converted.fidelity["counts"]["sounds"] == {"source": 1, "result": 1}


def test_a_slide_without_a_transition_of_its_own_plays_its_master_s_sound(office, tmp_path):
    """12 of the 91 slides of a corpus deck have no SlideShowSlideInfoAtom: they take their master's transition,
    which plays ``projctor.wav``. A plain soffice gives each of them the sound; docshift's gave it to the other 66
    only, and the report, which counts the sounds a deck plays, called it complete. Now all 78 play it, from one
    media part holding the .ppt's own sound."""
    source = next((CORPUS / "ppt").glob("br.com.diversas.palestras_*.ppt"))
    show = _Presentation.of_file(source)
    without = [number for number, located in enumerate(show.slide_containers(), 1)
               if ppt_sounds.transition(show.doc, located, show.budget) is None]
    assert len(without) == 12
    (sound,) = _source_sounds(source)[0].values()

    def playing(result):
        """{slide number: whether the sound its transition plays is the .ppt's, inside the package} of a .pptx."""
        found = {}
        with zipfile.ZipFile(result) as package:
            for number in range(1, 92):
                part = f"ppt/slides/slide{number}.xml"
                played = re.search(r'<p:sndAc><p:stSnd><p:snd r:embed="([^"]+)"', package.read(part).decode())
                if played:
                    found[number] = plays(package, played.group(1), sound.data, part)
        return found

    plain = playing(soffice(source, "pptx", tmp_path / "plain"))
    converted = convert.convert(office, source, "ppt", tmp_path / "ours", 60)
    ours = playing(converted.path)
    assert set(without) <= set(plain) and len(plain) == 78
    assert ours.keys() == plain.keys() and set(ours.values()) == {True}


def test_a_sound_left_outside_the_package_is_named_by_the_report(tmp_path):
    """The report counts the sounds the slides play (a transition's, a click's, a sound shape's) against the media
    parts the result's slides play: a plain soffice's .pptx of ``sound.ppt`` links its sound outside the package,
    and the report says so."""
    source = CORPUS / "ppt" / "sound.ppt"
    plain = soffice(source, "pptx", tmp_path)
    report = inventory.report(inventory.of_source(source, "ppt"), inventory.of_result(plain, "ppt"))
    assert report["counts"]["sounds"] == {"source": 1, "result": 0}
    assert not report["complete"] and [lost["what"] for lost in report["lost"]] == ["sounds"], report["lost"]


def test_a_sound_with_no_name_is_counted_and_its_loss_named(office, tmp_path):
    """Aspose.Slides writes its sounds with an empty name, which made them no sounds to the report: two embedded
    sounds that no result kept went unreported. ``sound.ppt`` with its sound's name blanked."""
    nameless = tmp_path / "nameless.ppt"
    shutil.copyfile(CORPUS / "ppt" / "sound.ppt", nameless)
    with olefile.OleFileIO(str(nameless), write_mode=True) as ole:
        data = bytearray(ole.openstream("PowerPoint Document").read())
        names = [(body, stop) for rec_type, instance, _, body, stop, _ in officeart.walk(data, 0, len(data), Budget())
                 if rec_type == ppt_sounds.RT_CSTRING and instance == 0 and data[body:stop] == "ringin.wav".encode(
                     "utf_16_le")]
        assert len(names) == 1
        data[names[0][0]:names[0][1]] = bytes(names[0][1] - names[0][0])
        ole.write_stream("PowerPoint Document", bytes(data))
    assert inventory.of_source(nameless, "ppt").counts["sounds"] == 1
    fidelity = convert.convert(office, nameless, "ppt", tmp_path / "ours", 60).fidelity
    assert fidelity["counts"]["sounds"]["source"] == 1
    # LibreOffice keeps no sound it finds no name for: the report says so, where it said nothing
    assert fidelity["counts"]["sounds"]["result"] == 1 or {"what": "sounds", "count": 1,
                                                           "detail": "1 of 1 sounds is missing"} in fidelity["lost"]


def test_a_source_that_is_no_compound_file_is_left_quietly(tmp_path, caplog):
    """LibreOffice converts a .ppt that is no compound file (PowerPoint 2 and 3, or a .pptx under a .ppt name):
    the mends have no records to read there, which is no fault, and they say nothing."""
    made = tmp_path / "made.pptx"
    pptx.Presentation().save(str(made))
    named = tmp_path / "named.ppt"
    named.write_bytes(made.read_bytes())
    with caplog.at_level("WARNING", logger="docshift.engine"):
        assert slide_sounds.mend(made, named, "ppt") == 0
        assert objects.mend(made, named, "ppt", None) == 0
    assert caplog.records == []


SLIDE = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<p:sld xmlns:a="http://schemas.openxmlformats.org/'
         'drawingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" '
         'xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" xmlns:mc="http://schemas.'
         'openxmlformats.org/markup-compatibility/2006" xmlns:p14="http://schemas.microsoft.com/office/powerpoint/'
         '2010/main"><p:cSld><p:spTree><p:nvGrpSpPr><p:cNvPr id="1" name="" descr="two&#13;&#10;lines"/>'
         '<p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/></p:spTree></p:cSld>{after}</p:sld>')
TRANSITIONS = {
    "none": "",
    "none, before the timing": "<p:timing><p:tnLst/></p:timing><p:extLst/>",
    "empty": '<p:transition spd="slow"/>',
    "empty, spaced": '<p:transition spd="slow"  \n/><p:timing/>',
    "with an effect": '<p:transition spd="med" advTm="3000"><p:fade/></p:transition>',
    "before its extension list": '<p:transition><p:wipe dir="r"/><p:extLst><p:ext uri="x"/></p:extLst>'
                                 '</p:transition>',
    "alternatives": '<mc:AlternateContent><mc:Choice Requires="p14"><p:transition spd="slow" p14:dur="2000">'
                    '<p14:prism/></p:transition></mc:Choice><mc:Fallback><p:transition spd="slow"><p:fade/>'
                    '</p:transition></mc:Fallback></mc:AlternateContent><p:timing/>',
}


@pytest.mark.parametrize("loop", [False, True])
@pytest.mark.parametrize("shape", TRANSITIONS)
def test_a_transition_sound_written_into_the_bytes_is_what_the_dom_writes(shape, loop):
    """A slide that needs only its transition's sound gets it written into its bytes, not through a DOM (a deck of
    the corpus with a sound on each of 78 slides: 1.4 s of DOMs). The XML is what the DOM writes, for every shape
    of a slide's transitions, and every other byte stays as LibreOffice wrote it."""
    from xml.dom import minidom
    from xml.etree.ElementTree import canonicalize

    data = SLIDE.format(after=TRANSITIONS[shape]).encode()
    doc = minidom.parseString(data)
    slide_sounds._transition_sound(doc, "rId7", 'a "chime" & more.wav', loop)
    written = slide_sounds._with_transition_sound(data, "slide.xml", "rId7", 'a "chime" & more.wav', loop)
    assert canonicalize(written) == canonicalize(slide_sounds.ooxml.serialize(doc))
    assert written.startswith(data[:data.index(b"</p:cSld>")])  # the slide before its transition, byte for byte
    assert written.count(b"<p:sndAc>") == max(1, TRANSITIONS[shape].count("<p:transition"))


def test_a_transition_sound_declares_the_prefixes_a_slide_does_not_bind():
    """A slide that binds its namespaces to other prefixes (or to none) gets elements that declare their own: the
    sound reads as PresentationML's, with its relationship, wherever it goes."""
    from xml.parsers import expat

    data = (b'<sld xmlns="http://schemas.openxmlformats.org/presentationml/2006/main" xmlns:rel="http://schemas.'
            b'openxmlformats.org/officeDocument/2006/relationships"><cSld/><transition/></sld>')
    written = slide_sounds._with_transition_sound(data, "slide.xml", "rId2", "ding.wav", False)
    seen = []
    parser = expat.ParserCreate(namespace_separator="}")
    parser.StartElementHandler = lambda tag, attributes: seen.append((tag, attributes))
    parser.Parse(written, True)
    main = "http://schemas.openxmlformats.org/presentationml/2006/main"
    assert [tag for tag, _ in seen] == [f"{main}}}{name}" for name in ("sld", "cSld", "transition", "sndAc", "stSnd",
                                                                       "snd")]
    assert seen[-1][1] == {"http://schemas.openxmlformats.org/officeDocument/2006/relationships}embed": "rId2",
                           "name": "ding.wav"}

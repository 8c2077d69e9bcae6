"""A deck's theme colours: PowerPoint's palette for the result is the deck's colour scheme, not LibreOffice's theme."""

import re
import zipfile

import pytest
from conftest import ROOT
from conftest import _soffice_save as soffice

from docshift.engine import convert, slide_schemes
from docshift.engine.inventory import of_source, officeart
from docshift.engine.inventory.common import SCHEME_SLOTS, Palette, ThemeFont
from docshift.engine.inventory.package import NS_A, NS_P, NS_R
from docshift.engine.inventory.ppt import _Presentation
from docshift.engine.inventory.ppt_schemes import (
    RT_COLOR_SCHEME,
    RT_ROUND_TRIP_THEME,
    SLIDE_SCHEME,
    _pitch_family,
    of_scheme,
    round_trip,
)

CORPUS = ROOT.parent / "shared" / "corpus" / "ppt"
MS_PGOTHIC = "\uff2d\uff33 \uff30\u30b4\u30b7\u30c3\u30af"  # its name as Japanese Windows writes it, full-width


def theme(result):
    """(the name of the first theme's colour scheme, {slot: RRGGBB}, the first master's colour map) of ``result``."""
    with zipfile.ZipFile(result) as package:
        xml = package.read("ppt/theme/theme1.xml").decode()
        master = package.read("ppt/slideMasters/slideMaster1.xml").decode()
    scheme = re.search(r'<a:clrScheme name="([^"]*)">(.*?)</a:clrScheme>', xml, re.DOTALL)
    colours = {slot: value.lower() for slot, value in
               re.findall(r'<a:(\w+)><a:(?:srgbClr val|sysClr [^>]*lastClr)="(\w{6})"', scheme.group(2))}
    mapping = dict(re.findall(r'(bg1|tx1|bg2|tx2)="(\w+)"', re.search(r"<p:clrMap [^>]*>", master).group()))
    return scheme.group(1), colours, mapping


def masters_with_themes():
    """(deck, the scheme of each main master of the corpus's decks that carries the theme PowerPoint saved with it,
    that theme's colours)."""
    found = []
    for path in sorted(CORPUS.glob("*.ppt")):
        try:
            show = _Presentation.of_file(path)
        except Exception:
            continue
        for located in show.master_containers().values():
            scheme, saved = None, None
            for rec_type, instance, _, body, stop in officeart.children(show.doc, *located, show.budget):
                if rec_type == RT_COLOR_SCHEME and instance == SLIDE_SCHEME:
                    scheme = tuple(show.doc[body + at:body + at + 3].hex() for at in range(0, 32, 4))
                elif rec_type == RT_ROUND_TRIP_THEME:
                    saved = round_trip(bytes(show.doc[body:stop]))
            if scheme and saved:
                found.append((path.name, scheme, saved))
    return found


def test_the_theme_made_of_a_scheme_is_the_one_powerpoint_saved():
    """Each main master of the corpus that PowerPoint 2007 or later saved keeps its scheme and its theme. The theme
    made of the scheme has the saved theme's eight colours that stand for the scheme's, on light backgrounds and
    dark ones. Where the saved theme was itself made of a scheme, rather than picked among Office's themes, its four
    other accents agree too: all twelve colours, exactly."""
    found = masters_with_themes()
    assert len(found) >= 60
    whole = dark = 0
    for deck, scheme, saved in found:
        made = of_scheme(scheme)
        eight = [index for index, slot in enumerate(SCHEME_SLOTS) if slot[-1] not in "3456"]
        assert [made.colours[index][0] for index in eight] == [saved.colours[index][0] for index in eight], deck
        whole += [colour for colour, _ in made.colours] == [colour for colour, _ in saved.colours]
        dark += made.dark
    assert whole >= 12 and dark >= 4


def test_a_deck_of_powerpoint_2003_gets_its_scheme_s_theme(office, tmp_path):
    """``60294.ppt`` (a scheme, no saved theme): LibreOffice's result has LibreOffice's theme; docshift's has the
    theme PowerPoint made of the same scheme and saved in ``bug52297.ppt``."""
    name, colours, _ = theme(soffice(CORPUS / "60294.ppt", "pptx", tmp_path / "plain"))
    assert (name, colours["accent1"], colours["hlink"]) == ("LibreOffice", "18a303", "0000ee")
    converted = convert.convert(office, CORPUS / "60294.ppt", "ppt", tmp_path / "work", 60)
    _, colours, mapping = theme(converted.path)
    saved = next(saved for deck, _, saved in masters_with_themes() if deck == "bug52297.ppt")
    assert [colours[slot] for slot in SCHEME_SLOTS] == [colour for colour, _ in saved.colours]
    assert colours["accent1"] == "00cc99" and colours["hlink"] == "ccccff"
    assert mapping == {"bg1": "lt1", "tx1": "dk1", "bg2": "lt2", "tx2": "dk2"}


def test_a_deck_on_a_dark_background_gets_its_saved_theme_and_colour_map(office, tmp_path):
    """``bug62591.ppt`` (light text on blue, saved by PowerPoint 2007 or later with its theme "Bergspitze 6"):
    docshift's result has that theme and the colour map that reads the background as dk2, and LibreOffice reads
    the deck's colours from it where it reads its own from the plain result."""
    plain = soffice(CORPUS / "bug62591.ppt", "pptx", tmp_path / "plain")
    assert theme(plain)[2] == {"bg1": "lt1", "tx1": "dk1", "bg2": "lt2", "tx2": "dk2"}
    converted = convert.convert(office, CORPUS / "bug62591.ppt", "ppt", tmp_path / "work", 60)
    name, colours, mapping = theme(converted.path)
    assert name == "Bergspitze 6"
    assert (colours["dk2"], colours["lt1"], colours["accent1"], colours["hlink"]) == \
        ("6699ff", "ffffff", "ff9933", "ffcfab")
    assert mapping == {"bg1": "dk2", "tx1": "lt1", "bg2": "dk1", "tx2": "lt2"}
    for result, expected in ((plain, "LibreOffice"), (converted.path, "Bergspitze 6")):
        odp = soffice(result, "odp", tmp_path / f"odp-{expected[0]}")
        with zipfile.ZipFile(odp) as package:
            styles = package.read("styles.xml").decode()
        assert re.search(r'<loext:theme-colors loext:name="([^"]*)"', styles).group(1) == expected
    assert 'loext:name="dark2" loext:color="#6699ff"' in styles


def test_a_master_whose_slides_come_from_masters_of_two_schemes_is_left_alone(tmp_path):
    """``56260.ppt``'s slides use two main masters of different fills, and LibreOffice makes one master of them:
    its theme is left as LibreOffice wrote it."""
    palettes = of_source(CORPUS / "56260.ppt", "ppt").palettes
    assert len(set(palettes.values())) == 2
    result = tmp_path / "56260.pptx"
    with zipfile.ZipFile(result, "w") as package:
        package.writestr("ppt/presentation.xml", f'<p:presentation xmlns:p="{NS_P}" xmlns:r="{NS_R}"><p:sldIdLst>'
                         + "".join(f'<p:sldId r:id="rId{n}"/>' for n in palettes) + "</p:sldIdLst></p:presentation>")
        package.writestr("ppt/_rels/presentation.xml.rels", RELS.format("".join(
            f'<Relationship Id="rId{n}" Type="{slide_schemes.RELATION}slide" Target="slides/slide{n}.xml"/>'
            for n in palettes)))
        for n in palettes:
            package.writestr(f"ppt/slides/slide{n}.xml", "<p:sld xmlns:p='p'/>")
            package.writestr(f"ppt/slides/_rels/slide{n}.xml.rels", RELS.format(
                f'<Relationship Id="rId1" Type="{slide_schemes.LAYOUT}" Target="../slideLayouts/slideLayout1.xml"/>'))
        package.writestr("ppt/slideLayouts/slideLayout1.xml", "<p:sldLayout xmlns:p='p'/>")
        package.writestr("ppt/slideLayouts/_rels/slideLayout1.xml.rels", RELS.format(
            f'<Relationship Id="rId1" Type="{slide_schemes.MASTER}" Target="../slideMasters/slideMaster1.xml"/>'))
        package.writestr("ppt/slideMasters/slideMaster1.xml", "<p:sldMaster xmlns:p='p'/>")
        package.writestr("ppt/slideMasters/_rels/slideMaster1.xml.rels", RELS.format(
            f'<Relationship Id="rId1" Type="{slide_schemes.THEME}" Target="../theme/theme1.xml"/>'))
        package.writestr("ppt/theme/theme1.xml", THEME)
    before = result.read_bytes()
    assert slide_schemes.mend(result, CORPUS / "56260.ppt", "ppt", palettes) == 0
    assert result.read_bytes() == before
    one = dict.fromkeys(palettes, palettes[1])
    assert slide_schemes.mend(result, CORPUS / "56260.ppt", "ppt", one) == 1
    assert theme_of(result) == slide_schemes.scheme_xml("a:", palettes[1]).decode()
    with zipfile.ZipFile(result) as package:  # the theme named as the master's design
        assert palettes[1].design and f'name="{palettes[1].design}"' in package.read("ppt/theme/theme1.xml").decode()


RELS = '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">{}</Relationships>'
THEME = (f'<a:theme xmlns:a="{NS_A}" name="x"><a:themeElements><a:clrScheme name="LibreOffice"><a:dk1>'
         '<a:srgbClr val="000000"/></a:dk1></a:clrScheme><a:fontScheme name="f"/></a:themeElements></a:theme>')


def theme_of(result):
    with zipfile.ZipFile(result) as package:
        xml = package.read("ppt/theme/theme1.xml").decode()
    assert re.match(f'<a:theme xmlns:a="{NS_A}" name="[^"]*"><a:themeElements>', xml)  # named, where a design is
    assert xml.endswith('<a:fontScheme name="f"/></a:themeElements></a:theme>')
    return re.search(r"<a:clrScheme.*</a:clrScheme>", xml).group()


@pytest.mark.parametrize("prefix", ["", "d:"])
def test_a_scheme_is_written_in_the_theme_s_own_prefix_and_every_other_byte_kept(prefix):
    """A theme whose DrawingML elements carry another prefix, or none, gets its scheme in that prefix; a system
    colour PowerPoint saved stays one, with its last colour."""
    declared = f'xmlns{":" + prefix[:-1] if prefix else ""}="{NS_A}"'
    xml = (f'<{prefix}theme {declared}><{prefix}clrScheme name="LibreOffice"><{prefix}dk1/></{prefix}clrScheme>'
           f'<{prefix}fontScheme/></{prefix}theme>').encode()
    palette = Palette('Office "1"', (("000000", "windowText"),) + (("ffffff", ""),) * 11, False)
    edited = slide_schemes.recoloured(xml, "theme1.xml", palette)
    assert edited.startswith(f"<{prefix}theme {declared}><{prefix}clrScheme name=\"Office &quot;1&quot;\">".encode())
    assert f'<{prefix}dk1><{prefix}sysClr val="windowText" lastClr="000000"/></{prefix}dk1>'.encode() in edited
    assert f'<{prefix}folHlink><{prefix}srgbClr val="FFFFFF"/></{prefix}folHlink>'.encode() in edited
    assert edited.endswith(f"</{prefix}clrScheme><{prefix}fontScheme/></{prefix}theme>".encode())


def names(result):
    """(the first theme's name, the first slide master's name) of ``result``."""
    with zipfile.ZipFile(result) as package:
        xml = package.read("ppt/theme/theme1.xml").decode()
        master = package.read("ppt/slideMasters/slideMaster1.xml").decode()
    found = re.search(r'<p:cSld name="([^"]*)"', master)
    return re.search(r'<a:theme [^>]*name="([^"]*)"', xml).group(1), found.group(1) if found else None


def test_a_master_keeps_the_name_of_its_design(office, tmp_path):
    """A .ppt's main master names its design (``bug45124.ppt``'s "My blank presentation"); PowerPoint shows it in the
    slide master view and the Design tab. LibreOffice's import drops it: its theme is "Office", its master unnamed."""
    assert names(soffice(CORPUS / "bug45124.ppt", "pptx", tmp_path / "plain")) == ("Office", None)
    converted = convert.convert(office, CORPUS / "bug45124.ppt", "ppt", tmp_path / "work", 60)
    assert names(converted.path) == ("My blank presentation", "My blank presentation")
    import pptx

    assert pptx.Presentation(converted.path).slide_master.name == "My blank presentation"


def fonts(result):
    """{(majorFont or minorFont, latin, ea or cs): (typeface, charset)} of the first theme of ``result``."""
    with zipfile.ZipFile(result) as package:
        xml = package.read("ppt/theme/theme1.xml").decode()
    return {(group, slot): (typeface, charset) for group, body in re.findall(r"<a:(majorFont|minorFont)>(.*?)</a:\1>",
                                                                           xml, re.DOTALL)
            for slot, typeface, charset in re.findall(r'<a:(latin|ea|cs) typeface="([^"]*)"[^>]*charset="([^"]*)"',
                                                      body)}


def test_a_deck_s_east_asian_and_latin_fonts_go_into_its_theme(office, tmp_path):
    """``54880_chinese.ppt``'s master styles set Calibri and MS PGothic (Shift JIS). LibreOffice's theme names Arial
    and DejaVu Sans, and no run of its slides names an East Asian font, so PowerPoint showed the Japanese text in a
    font without its glyphs; docshift's theme names the master's fonts, and the complex-script font stays."""
    source = CORPUS / "54880_chinese.ppt"
    plain = fonts(soffice(source, "pptx", tmp_path / "plain"))
    assert {plain[group, slot][0] for group in ("majorFont", "minorFont") for slot in ("latin", "ea")} == {
        "Arial", "DejaVu Sans"}
    palettes = set(of_source(source, "ppt", False).palettes.values())
    assert {palette.fonts for palette in palettes} == {(
        ThemeFont("Calibri", 0, 34), ThemeFont(MS_PGOTHIC, -128, 0)) * 2}
    converted = convert.convert(office, source, "ppt", tmp_path / "work", 60)
    written = fonts(converted.path)
    for group in ("majorFont", "minorFont"):
        assert written[group, "latin"] == ("Calibri", "0")
        assert written[group, "ea"] == (MS_PGOTHIC, "-128")
        assert written[group, "cs"] == plain[group, "cs"]
    assert converted.fidelity["complete"] is True


def test_fonts_the_deck_does_not_name_stay_as_they_were():
    """A theme gets the fonts the master names, each in the theme's own tag (its other attributes kept); one the
    master does not name keeps LibreOffice's."""
    xml = (f'<a:theme xmlns:a="{NS_A}"><a:fontScheme name="Office"><a:majorFont><a:latin typeface="Arial" panose="1"/>'
           '<a:ea typeface="DejaVu Sans"/></a:majorFont><a:minorFont><a:latin typeface="Arial"/>'
           '<a:ea typeface="DejaVu Sans"/></a:minorFont></a:fontScheme></a:theme>').encode()
    song = ThemeFont("宋体", -122, 2)
    edited = slide_schemes.refonted(xml, "theme1.xml", (None, song, None, song))
    assert edited == xml.replace(b'<a:ea typeface="DejaVu Sans"/>',
                                 '<a:ea typeface="宋体" pitchFamily="2" charset="-122"/>'.encode())
    assert slide_schemes.refonted(xml, "theme1.xml", (None,) * 4) is xml


def test_a_font_s_pitch_and_family_is_one_drawingml_allows():
    """A FontEntityAtom's lfPitchAndFamily may carry bits beside its pitch and family (TrueType's, 0x04), which
    DrawingML's ``pitchFamily`` enumeration has not: they are left out, and the pitch and family kept."""
    allowed = {pitch | family << 4 for pitch in range(3) for family in range(6)}
    assert all(_pitch_family(value) in allowed for value in range(256))
    assert (_pitch_family(0x22), _pitch_family(0x26), _pitch_family(0x31)) == (0x22, 0x22, 0x31)

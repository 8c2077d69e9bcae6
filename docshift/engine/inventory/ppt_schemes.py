"""The theme colours of a .ppt's main masters, as PowerPoint gives them to the deck it opens.

A main master holds its colour scheme: eight colours, its SlideSchemeColorSchemeAtom ([MS-PPT] 2.4.17, a
ColorSchemeAtom of recInstance 1): background, text and lines, shadows, title text, fills, accent, accent and
hyperlink, accent and followed hyperlink. A .pptx theme has twelve. PowerPoint 2007 and later, saving a .ppt, keep
the master's theme beside the scheme (RoundTripTheme12Atom, 2.11.26: a package holding ``theme/theme/theme1.xml``),
and read it back where it still agrees with the scheme; PowerPoint 2003 saves no theme, and a theme that an older
PowerPoint saved the deck over no longer agrees.

Where PowerPoint makes the theme of a scheme, it is made as follows. This was measured on the 177 main masters of
122 deck files that carry both; 51 of them came from a scheme of PowerPoint 2003, and each of their twelve colours
agrees:

- On a light background (the background lighter than the text), lt1 is the background, dk1 the text, lt2 the
  shadows and dk2 the title text.
- On a dark one, dk2 is the background, lt1 the text, dk1 the shadows and lt2 the title text. The master's colour
  map then reads bg1 as dk2, tx1 as lt1, bg2 as dk1 and tx2 as lt2, as each of those decks' RoundTripColorMapping12Atom
  says.
- accent1 is the fills, accent2 the accent, hlink and folHlink the two hyperlink colours.
- accent3 is the background tinted to 60%, accent4 the text shaded to 70%, accent5 the fills tinted to 60%, accent6
  the accent shaded to 80%. DrawingML's tint and shade ([ECMA-376] 20.1.2.3.34, .31) work in linear RGB.
"""

import io
import re
import struct
import zipfile
from collections.abc import Sequence

from docshift.engine import ooxml
from docshift.engine.inventory import officeart, ppt_text_styles
from docshift.engine.inventory.common import SCHEME_SLOTS, Budget, Palette, ThemeFont, Unreadable, attempt
from docshift.engine.inventory.package import NS_A, SEP

RT_COLOR_SCHEME, RT_ROUND_TRIP_THEME = 0x07F0, 0x040E
RT_FONT_COLLECTION, RT_FONT_ENTITY, FONT_ENTITY_SIZE = 0x07D5, 0x0FB7, 68  # a name of 32 UTF-16 units, 4 bytes more
TEXTS = (0, 1)  # the text types of a master's title and body styles (TextMasterStyleAtom's recInstance)
SLIDE_SCHEME = 1  # the recInstance of a master's own scheme (6: the schemes listed for the user to pick)
# a main master's TemplateNameAtom ([MS-PPT] 2.5.18): a CString of recInstance 2, the design's name ("Blueprint")
RT_CSTRING, TEMPLATE_NAME, MAX_NAME = 0x0FBA, 2, 512
THEME_PART = re.compile(r"theme/theme/theme\d*\.xml")
MAX_THEME = 1 << 20  # bytes of a round-trip theme, packed or not; PowerPoint's are some 7-30 KB
COLOUR_SCHEME, SRGB, SYSTEM = (f"{NS_A}{SEP}{local}" for local in ("clrScheme", "srgbClr", "sysClr"))
# a theme's font groups (headings, body) and each group's scripts; its fonts as Palette.fonts lists them
FONT_GROUPS = (f"{NS_A}{SEP}majorFont", f"{NS_A}{SEP}minorFont")
FONT_SLOTS = (f"{NS_A}{SEP}latin", f"{NS_A}{SEP}ea")
FONT_PLACES = tuple((group, slot) for group in FONT_GROUPS for slot in FONT_SLOTS)
# the eight colours a theme holds as the scheme has them: slot -> the scheme's colour on a light, on a dark background
BACKGROUND, TEXT, SHADOWS, TITLE, FILLS, ACCENT, HYPERLINK, FOLLOWED = range(8)
SAME = {"accent1": (FILLS, FILLS), "accent2": (ACCENT, ACCENT), "hlink": (HYPERLINK, HYPERLINK),
        "folHlink": (FOLLOWED, FOLLOWED), "lt1": (BACKGROUND, TEXT), "dk1": (TEXT, SHADOWS),
        "lt2": (SHADOWS, TITLE), "dk2": (TITLE, BACKGROUND)}


def palette(doc: bytes, located: tuple[int, int], budget: Budget,
            fonts: Sequence[ThemeFont | None] = ()) -> Palette | None:
    """The :class:`Palette` of the main master container ``located``: its round-trip theme's colours where they
    agree with its scheme, else those PowerPoint makes of the scheme; None without a scheme. Its fonts are those of
    its title's and body's first level, of the deck's ``fonts`` (``font_collection``)."""
    scheme: tuple[str, ...] | None = None
    theme: Palette | None = None
    design = ""
    styles: dict[int, tuple[int | None, int | None]] = {}  # {a text type of TEXTS: (Latin, East Asian font index)}
    for rec_type, instance, _, body, stop in officeart.children(doc, *located, budget):
        if rec_type == RT_COLOR_SCHEME and instance == SLIDE_SCHEME and stop - body >= 32:
            scheme = tuple(bytes(doc[body + at:body + at + 3]).hex() for at in range(0, 32, 4))
        elif rec_type == RT_ROUND_TRIP_THEME and stop - body <= MAX_THEME:
            theme = attempt(round_trip, bytes(doc[body:stop]))
        elif rec_type == RT_CSTRING and instance == TEMPLATE_NAME and stop - body <= MAX_NAME:
            design = bytes(doc[body:stop]).decode("utf-16-le", "replace").strip("\x00").strip()
        elif rec_type == ppt_text_styles.RT_TEXT_MASTER_STYLE and instance in TEXTS and instance not in styles:
            styles[instance] = attempt(ppt_text_styles.master_fonts, doc, body, stop) or (None, None)
    if scheme is None:
        return None
    made = of_scheme(scheme)._replace(design=design if design.isprintable() else "", fonts=tuple(
        fonts[index] if index is not None and index < len(fonts) else None
        for instance in TEXTS for index in styles.get(instance, (None, None))))
    if theme is not None and all(theme.colours[index][0] == made.colours[index][0]
                                 for index, slot in enumerate(SCHEME_SLOTS) if slot in SAME):
        return theme._replace(dark=made.dark, design=made.design, fonts=made.fonts)
    return made


def font_collection(doc: bytes, start: int, end: int, budget: Budget) -> list[ThemeFont | None]:
    """The fonts of the FontCollection among the records of the Environment ``doc[start:end]``, in order (an
    index of a text's formatting names one), each None where its atom is too short to name one."""
    fonts: list[ThemeFont | None] = []
    for rec_type, _, _, body, stop in officeart.children(doc, start, end, budget):
        if rec_type != RT_FONT_COLLECTION:
            continue
        for child, _, _, child_body, child_stop in officeart.children(doc, body, stop, budget):
            if child != RT_FONT_ENTITY:
                continue
            if child_stop - child_body < FONT_ENTITY_SIZE:
                fonts.append(None)
                continue
            name = bytes(doc[child_body:child_body + 64]).decode("utf-16-le", "replace").split("\x00")[0]
            charset, pitch_family = struct.unpack_from("<bxxB", doc, child_body + 64)
            fonts.append(ThemeFont(name, charset, _pitch_family(pitch_family))
                         if name.isprintable() and name.strip() else None)
        break
    return fonts


def of_scheme(scheme: tuple[str, ...]) -> Palette:
    """The theme colours PowerPoint makes of the eight colours of a ``scheme`` (RRGGBB each, in the atom's order)."""
    dark = _lightness(scheme[BACKGROUND]) < _lightness(scheme[TEXT])
    derived = {"accent3": _tint(scheme[BACKGROUND], 0.6), "accent4": _shade(scheme[TEXT], 0.7),
               "accent5": _tint(scheme[FILLS], 0.6), "accent6": _shade(scheme[ACCENT], 0.8)}
    colours = tuple((derived[slot] if slot in derived else scheme[SAME[slot][dark]], "") for slot in SCHEME_SLOTS)
    return Palette("Custom", colours, dark)


def round_trip(data: bytes) -> Palette | None:
    """The name and colours of the first colour scheme of the theme a RoundTripTheme12Atom's package holds, where
    each colour is an RGB or a system colour with its last RGB, and its font scheme's headings' and body's Latin and
    East Asian fonts (None for one it leaves empty); ``dark`` left False."""
    with zipfile.ZipFile(io.BytesIO(data)) as package:
        found = [info for info in package.infolist() if THEME_PART.fullmatch(info.filename)]
        if not found or found[0].file_size > MAX_THEME:
            return None
        xml = ooxml.read(package, found[0], MAX_THEME)
    name: list[str] = []
    colours: dict[str, tuple[str, str] | None] = {}
    open_slot: list[str] = []  # the slot whose colour comes next, inside the scheme
    fonts: dict[tuple[str, str], ThemeFont | None] = {}
    group = [""]  # the font group (majorFont, minorFont) open

    def start(tag: str, attributes: dict[str, str]) -> None:
        local = tag.rpartition(SEP)[2]
        if tag in FONT_GROUPS:
            group[0] = tag
        elif (group[0], tag) in FONT_PLACES and (group[0], tag) not in fonts:
            fonts[group[0], tag] = _theme_font(attributes)
        if tag == COLOUR_SCHEME and not name:
            name.append(attributes.get("name", ""))
        elif len(name) == 1 and tag.startswith(NS_A + SEP) and local in SCHEME_SLOTS and local not in colours:
            open_slot[:] = [local]
            colours[local] = None
        elif open_slot:
            value = attributes.get("val" if tag == SRGB else "lastClr", "")
            colours[open_slot.pop()] = (value.lower(), attributes.get("val", "") if tag == SYSTEM else "") \
                if tag in (SRGB, SYSTEM) and re.fullmatch(r"[0-9A-Fa-f]{6}", value) else None

    def end(tag: str) -> None:
        if tag == COLOUR_SCHEME and len(name) == 1:
            name.append("")  # the first scheme is read; any other (extraClrSchemeLst) is not
        elif tag == group[0]:
            group[0] = ""

    ooxml.stream((xml,), THEME_PART.pattern, start, end, unreadable=Unreadable)
    listed = [colours.get(slot) for slot in SCHEME_SLOTS]
    if not name or any(colour is None for colour in listed):
        return None
    return Palette(name[0], tuple(colour for colour in listed if colour is not None), False,
                   fonts=tuple(fonts.get(place) for place in FONT_PLACES))


def _theme_font(attributes: dict[str, str]) -> ThemeFont | None:
    """A font scheme's ``a:latin`` or ``a:ea`` (CT_TextFont: charset 1 and pitchFamily 0 where left out); None where
    its typeface is empty or a value does not read."""
    try:
        charset, pitch_family = int(attributes.get("charset", "1")), int(attributes.get("pitchFamily", "0"))
    except ValueError:
        return None
    typeface = attributes.get("typeface", "")
    return ThemeFont(typeface, charset, pitch_family) if typeface and -128 <= charset < 128 \
        and -128 <= pitch_family < 128 else None


def _pitch_family(value: int) -> int:
    """A LOGFONT's lfPitchAndFamily as DrawingML's ``pitchFamily`` holds one: a pitch of 0-2 and a family of 0-5 (in
    the high four bits); bits beside them (TrueType's, some writers') are left out, a value beyond them is 0."""
    pitch, family = value & 0x03, value & 0xF0
    return (pitch if pitch < 3 else 0) | (family if family <= 0x50 else 0)


def _channels(colour: str) -> list[int]:
    return [int(colour[at:at + 2], 16) for at in (0, 2, 4)]


def _lightness(colour: str) -> int:
    """Twice HSL's lightness, 0-510."""
    channels = _channels(colour)
    return max(channels) + min(channels)


def _linear(channel: int) -> float:
    value = channel / 255
    return value / 12.92 if value <= 0.04045 else ((value + 0.055) / 1.055) ** 2.4


def _gamma(value: float) -> int:
    value = min(1.0, max(0.0, value))
    return round(255 * (value * 12.92 if value <= 0.0031308 else 1.055 * value ** (1 / 2.4) - 0.055))


def _tint(colour: str, amount: float) -> str:
    """``colour`` tinted to ``amount``: so much of it, the rest white, mixed in linear RGB."""
    return "".join(f"{_gamma(_linear(channel) * amount + 1 - amount):02x}" for channel in _channels(colour))


def _shade(colour: str, amount: float) -> str:
    """``colour`` shaded to ``amount``: so much of it, the rest black, mixed in linear RGB."""
    return "".join(f"{_gamma(_linear(channel) * amount):02x}" for channel in _channels(colour))

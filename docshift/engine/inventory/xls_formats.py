"""Excel 2007's conditional formats of an .xls sheet that need no formula: colour scales, data bars and icon sets.

Excel 2007 and later keep such a format in a CONDFMT12 record (the ranges, [MS-XLS] 2.4.57) followed by a CF12
record for each of its rules (2.4.43), where an older Excel ignores them. LibreOffice's import reads only the
CONDFMT and CF records of the classic formats, so these rules are lost: of 685 workbooks of the corpus and POI's and
LibreOffice's tests, 4 had 45 of them (26 icon sets, 6 data bars, 5 colour scales, 8 of a formula or a value).

A CF12 record's layout, as Excel writes it (checked on those records): its FrtRefHeader (12 bytes); ct, cp;
cce1, cce2; DXFN12 (cbdxf, then cbdxf bytes of formatting, or 2 reserved bytes where it is 0); rgce1, rgce2; the
active formula (cce and rgce); a byte of flags; ipriority; icfTemplate; cbTemplateParm and as many bytes of template
parameters; then the rule's own structure: CFGradient (ct 3), CFDatabar (4), CFMultistate (6). Each threshold is a
CFVO: its type, a formula (cce and rgce) and, but for the minimum and the maximum, a number. A rule whose threshold
is a formula (CFVO type 7) is left out, as are the rules of ct 1, 2 and 5, whose formulas and formatting a later
round may read, and a CF12 record that extends a classic format (after its CFEX), whose classic rule LibreOffice
keeps.
"""

import struct

from docshift.engine.inventory.common import Scale

BIFF_CONDFMT12, BIFF_CF12 = 0x0879, 0x087A
# a classic format's CONDFMT, and the CFEX that may give it a CF12 record: such a rule stands beside the classic
# rule that LibreOffice keeps, and is left out
BIFF_CONDFMT, BIFF_CFEX = 0x01B0, 0x087B
COLOUR_SCALE, DATA_BAR, ICON_SET = 3, 4, 6
KINDS = {COLOUR_SCALE: "colorScale", DATA_BAR: "dataBar", ICON_SET: "iconSet"}
THRESHOLDS = {1: "num", 2: "min", 3: "max", 4: "percent", 5: "percentile"}  # CFVO's cfvoType, but 7: a formula
NO_NUMBER = (2, 3)  # the minimum and the maximum carry no number
ICON_SETS = ("3Arrows", "3ArrowsGray", "3Flags", "3TrafficLights1", "3TrafficLights2", "3Signs", "3Symbols",
             "3Symbols2", "4Arrows", "4ArrowsGray", "4RedToBlack", "4Rating", "4TrafficLights", "5Arrows",
             "5ArrowsGray", "5Rating", "5Quarters")  # CFMultistate's iIconSet, as iconSet names it
VALUE_HIDDEN, REVERSED = 0x01, 0x04  # the flags of CFDatabar and CFMultistate: the bar or icon alone; reversed


def ranges(body: bytes) -> tuple[tuple[int, int, int, int], ...]:
    """The ranges (first and last row, first and last column) of a CONDFMT12 record's ``body``: its SqRefU, after
    its FrtRefHeaderU, ccf, nID and refBound."""
    count = min(struct.unpack_from("<H", body, 24)[0], (len(body) - 26) // 8)
    return tuple(struct.unpack_from("<4H", body, 26 + 8 * index) for index in range(count))


def rule(body: bytes, where: tuple[tuple[int, int, int, int], ...]) -> Scale | None:
    """The rule of a CF12 record's ``body`` over the ranges ``where``, or None where it is not a colour scale, a
    data bar or an icon set of numbers, or does not read."""
    try:
        return _rule(body, where)
    except (struct.error, IndexError, ValueError):  # ValueError: a formula's threshold, a ninched colour
        return None


def _rule(body: bytes, where: tuple[tuple[int, int, int, int], ...]) -> Scale | None:
    kind = body[12]
    if kind not in KINDS or not where:
        return None
    first, second, dxf = struct.unpack_from("<HHI", body, 14)
    at = 22 + (dxf or 2) + first + second
    at += 2 + struct.unpack_from("<H", body, at)[0] + 1  # the active formula, the flags
    priority = struct.unpack_from("<H", body, at)[0]
    at += 4  # ipriority, icfTemplate
    at += 1 + body[at] + 3  # cbTemplateParm, its parameters; the rule's unused bytes and reserved byte
    if kind == COLOUR_SCALE:
        points, steps = body[at], body[at + 1]
        at += 3
        values = []
        for _ in range(points):
            value, at = _threshold(body, at)
            values.append(value)
            at += 8  # numDomain
        colours = []
        for _ in range(steps):
            colours.append(_colour(body, at + 8))  # after numGrange
            at += 24
        return Scale(where, priority, KINDS[kind], (), tuple(values), tuple(colours))
    if kind == DATA_BAR:
        flags, shortest, longest = body[at], body[at + 1], body[at + 2]
        colour = _colour(body, at + 3)
        low, at = _threshold(body, at + 19)
        high, at = _threshold(body, at)
        shown = (("showValue", "0"),) if flags & VALUE_HIDDEN else ()
        return Scale(where, priority, KINDS[kind], (("minLength", str(shortest)), ("maxLength", str(longest)))
                     + shown, (low, high), (colour,))
    states, icons, flags = body[at], body[at + 1], body[at + 2]
    at += 3
    values = []
    for _ in range(states):
        value, at = _threshold(body, at)
        values.append(value + ((("gte", "0"),) if not body[at] else ()))
        at += 5  # fEqual, unused
    attributes = (("iconSet", ICON_SETS[icons]),) + ((("showValue", "0"),) if flags & VALUE_HIDDEN else ()) + \
        ((("reverse", "1"),) if flags & REVERSED else ())
    return Scale(where, priority, KINDS[kind], attributes, tuple(values), ())


def _threshold(body: bytes, at: int) -> tuple[tuple[tuple[str, str], ...], int]:
    """(a ``cfvo``'s attributes, where the next structure starts) of the CFVO at ``at``."""
    kind, length = body[at], struct.unpack_from("<H", body, at + 1)[0]
    if kind not in THRESHOLDS:
        raise ValueError(f"a threshold of type {kind}")
    at += 3 + length
    if kind in NO_NUMBER:
        return (("type", THRESHOLDS[kind]),), at
    number = struct.unpack_from("<d", body, at)[0]
    return (("type", THRESHOLDS[kind]), ("val", f"{number:.15g}")), at + 8


def _colour(body: bytes, at: int) -> tuple[tuple[str, str], ...]:
    """A ``color``'s attributes of the CFColor at ``at``: automatic, indexed, RGB, or a theme's with its tint."""
    kind, value = struct.unpack_from("<II", body, at)
    if kind == 0:
        return (("auto", "1"),)
    if kind == 1:
        return (("indexed", str(value)),)
    if kind == 2:
        red, green, blue = body[at + 4:at + 7]
        return (("rgb", f"FF{red:02X}{green:02X}{blue:02X}"),)
    if kind == 3:
        tint = struct.unpack_from("<d", body, at + 8)[0]
        return (("theme", str(value)),) + ((("tint", f"{tint:.15g}"),) if tint else ())
    raise ValueError(f"a colour of type {kind}")

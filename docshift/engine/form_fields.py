"""What a .doc's form fields say beyond their name, type and result, put back where LibreOffice's import drops it.

A Word form (a text box, a check box, a drop-down of a protected document) keeps each field's settings in an FFData
structure of the Data stream, found through the ``sprmCPicLocation`` of the field's characters. LibreOffice's
fieldmarks carry the name, the type, the entries, the result and a text field's status text; of 253 .doc files of
the corpus and LibreOffice's tests, 4 lost 72 settings that the rest of FFData holds:

- a text field's default text, which Word shows again when the form is reset (``w:textInput/w:default``);
- its format (Uppercase, First capital, a number's or a date's picture: ``w:textInput/w:format``);
- the help text F1 shows, and a drop-down's status bar text (``w:helpText``, ``w:statusText``), each the field's
  own text or the name of an AutoText entry;
- a check box's default state (``w:checkBox/w:default``);
- the macros run on entering and leaving the field (``w:entryMacro``, ``w:exitMacro``): names, of the document's
  VBA project or of its template's, left out where the caller asked for no macros.

``mend`` reads the FFData of each form field in the .doc's order and gives each ``w:ffData`` of the result the
settings of the .doc's next field of its type and name that the result lacks, each where Word writes it. A field of
the result that no field of the .doc matches stays as it is.
"""

import re
import struct
from collections import defaultdict, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from docshift.engine import ooxml
from docshift.engine.cfb import CompoundFile
from docshift.engine.embedding import PartEdit, edit_parts, guarded, spliced
from docshift.engine.inventory.common import Budget, Unreadable, stream
from docshift.engine.inventory.doc import SPRM_FDATA, SPRM_PIC_LOCATION, _fib, character_runs
from docshift.engine.inventory.package import NS_W, SEP, Package

FORM, NAME, TEXT_INPUT, CHECK_BOX, DD_LIST = (f"{NS_W}{SEP}{local}" for local in (
    "ffData", "name", "textInput", "checkBox", "ddList"))
VALUE = f"{NS_W}{SEP}val"
KINDS = ("textInput", "checkBox", "ddList")  # FFData's iType: text, check box, drop-down
# the settings of w:ffData in Word's order, before the field's kind; and of textInput and checkBox
FORM_ORDER = ("name", "label", "tabIndex", "enabled", "calcOnExit", "entryMacro", "exitMacro", "helpText",
              "statusText", *KINDS)
INPUT_ORDER, BOX_ORDER = ("type", "default", "maxLength", "format"), ("size", "sizeAuto", "default", "checked")
# the parts of a text in the order of the .doc's stories: the body, notes, headers and footers
TEXT_PARTS = re.compile(r"word/(document|footnotes|endnotes|header[0-9]*|footer[0-9]*)\.xml")
FFDATA_VERSION, HEADER_SIZE = 0xFFFFFFFF, 0x44  # and the NilPICFAndBinData header before it
OWN_HELP, OWN_STATUS = 0x0080, 0x0100  # FFData's fOwnHelp, fOwnStat: the text itself, else an AutoText entry's name
# a text field's iTypeTxt, as w:textInput/w:type names it; regular text is the element left out
TEXT_TYPES = ("", "number", "date", "currentDate", "currentTime", "calculated")
LIMITS = {"helpText": 256, "statusText": 140, "entryMacro": 33, "exitMacro": 33}  # the schema's longest values


@dataclass(frozen=True)
class FormField:
    """What a .doc's FFData says of a field: its kind (as the .docx names it) and name, and each setting of it the
    mend writes ({element: its attributes}, in ffData; {element: value} in textInput or checkBox)."""
    kind: str
    name: str
    settings: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]
    inside: tuple[tuple[str, str], ...]


def mend(result: Path, source: Path, kind: str, macros: bool) -> int:
    """Give each form field of ``result`` (LibreOffice's export of the .doc ``source``) the settings of its FFData
    that it lacks; the macros it runs only if ``macros``. Returns how many
    settings went in (0: the file is untouched). Never raises for what the files hold."""
    if kind != "doc":
        return 0

    def parts(package: Package) -> Iterator[tuple[str, PartEdit]]:
        texts = sorted((name for name in package.names if TEXT_PARTS.fullmatch(name)
                        and package.holds(name, b"ffData")), key=_story_order)
        fields: dict[tuple[str, str], deque[FormField]] = defaultdict(deque)
        for found in fields_of(source, macros) if texts else []:
            fields[(found.kind, found.name)].append(found)
        for name in texts:
            yield name, lambda data, part: completed(data, part, fields)

    return guarded(lambda result, _: edit_parts(result, parts), result, source,
                   "the form fields' settings of %s stay out: %r")


def _story_order(part: str) -> tuple[int, int]:
    """Where the text part ``part`` comes among a .doc's stories, and its number among its kind."""
    name = part.removeprefix("word/").removesuffix(".xml")
    story = name.rstrip("0123456789")
    return ("document", "footnotes", "header", "footer", "endnotes").index(story), int(name[len(story):] or 0)


def fields_of(source: Path, macros: bool = True) -> list[FormField]:
    """The form fields of the .doc ``source``, in the order of their characters; the macros they run left out
    unless ``macros``."""
    with CompoundFile(source) as ole:
        word, data = stream(ole, "WordDocument"), stream(ole, "Data")
        if word is None or data is None:
            return []
        doc = _fib(word, lambda name: stream(ole, name))
    places: dict[int, int] = {}  # where each FFData is in the Data stream: the CP of its field's first character
    for start, _, properties in character_runs(doc, Budget()):
        if properties.get(SPRM_FDATA, b"\0")[:1] == b"\x01" and len(properties.get(SPRM_PIC_LOCATION, b"")) >= 4:
            location = struct.unpack_from("<I", properties[SPRM_PIC_LOCATION])[0]
            places.setdefault(location, cp if (cp := doc.cp(start)) is not None else 1 << 40)
    found = []
    for location in sorted(places, key=places.__getitem__):
        field = _ffdata(data, location, macros)
        if field is not None:
            found.append(field)
    return found


def _ffdata(data: bytes, location: int, macros: bool) -> FormField | None:
    """The field that the FFData after the NilPICFAndBinData header at ``location`` of the Data stream says; None
    where there is none (another field's data, or bytes that do not read as one)."""
    pos = location + HEADER_SIZE
    if location + 6 > len(data) or struct.unpack_from("<H", data, location + 4)[0] != HEADER_SIZE or \
            pos + 10 > len(data):
        return None
    version, bits = struct.unpack_from("<IH", data, pos)
    if version != FFDATA_VERSION or bits & 0x0003 == 3:
        return None
    kind, pos = bits & 0x0003, pos + 10
    texts: list[str] = []
    try:
        name, pos = _xstz(data, pos)
        if kind == 0:
            default, pos = _xstz(data, pos)
            state = 0
        else:
            default, state, pos = "", struct.unpack_from("<H", data, pos)[0], pos + 2
        for _ in range(5):  # its format, help text, status text, entry and exit macros
            text, pos = _xstz(data, pos)
            texts.append(text)
    except (struct.error, ValueError):
        return None
    text_format, help_text, status, entry, leaving = texts
    settings: list[tuple[str, tuple[tuple[str, str], ...]]] = [
        (element, (("val", value),)) for element, value in (("entryMacro", entry), ("exitMacro", leaving))
        if value and macros]
    settings += [(element, (("type", "text" if bits & own else "autoText"), ("val", value)))
                 for element, value, own in (("helpText", help_text, OWN_HELP), ("statusText", status, OWN_STATUS))
                 if value]
    typed = TEXT_TYPES[bits >> 11 & 0x7] if bits >> 11 & 0x7 < len(TEXT_TYPES) else ""
    inside = [("type", typed), ("default", default), ("format", text_format)] if kind == 0 else \
        [("default", "1")] if kind == 1 and state == 1 else []
    return FormField(KINDS[kind], name, tuple((element, tuple((key, value[:LIMITS.get(element, len(value))])
                                                              for key, value in attributes))
                                              for element, attributes in settings),
                     tuple((element, value) for element, value in inside if value))


def _xstz(data: bytes, pos: int) -> tuple[str, int]:
    """(the text of the Xstz at ``pos``: a count, UTF-16 characters and a terminating zero; where it ends)."""
    count = struct.unpack_from("<H", data, pos)[0]
    end = pos + 2 + 2 * count
    if end + 2 > len(data):
        raise ValueError("an Xstz runs past the Data stream")
    return data[pos + 2:end].decode("utf_16_le", "replace"), end + 2


@dataclass
class _Seen:
    """A ``w:ffData`` of a part as read: where it starts and its end tag is, its children's local names and where
    each starts, its name, and the same of its kind's element (textInput, checkBox or ddList)."""
    start: int
    end: int = -1
    children: dict[str, int] = field(default_factory=dict)
    name: str = ""
    kind: str = ""
    kind_start: int = -1
    kind_end: int = -1
    kind_children: dict[str, int] = field(default_factory=dict)
    kind_values: dict[str, str] = field(default_factory=dict)  # the w:val of each of them


def completed(data: bytes, part: str, fields: dict[tuple[str, str], deque[FormField]]) -> tuple[bytes, int]:
    """(the text part ``part`` (``data``) with each form field given the settings of the next of ``fields`` of its
    kind and name (or of the .doc's next unnamed one) that it lacks; how many went in). Each field of ``fields``
used is taken from it."""
    seen: list[_Seen] = []
    depth: list[str] = []  # the local names of the elements open inside the current ffData

    def start(tag: str, attributes: dict[str, str]) -> None:
        at = reader.CurrentByteIndex
        if tag == FORM:
            seen.append(_Seen(at))
            depth.clear()
        elif seen and seen[-1].end < 0 and tag.startswith(f"{NS_W}{SEP}"):
            local, form = tag.rpartition(SEP)[2], seen[-1]
            if not depth:
                form.children.setdefault(local, at)
                if tag == NAME:
                    form.name = attributes.get(VALUE, "")
                elif local in KINDS:
                    form.kind, form.kind_start = local, at
            elif len(depth) == 1 and depth[0] == form.kind:
                form.kind_children.setdefault(local, at)
                form.kind_values.setdefault(local, attributes.get(VALUE, ""))
            depth.append(local)

    def end(tag: str) -> None:
        at = reader.CurrentByteIndex
        if tag == FORM and seen:
            seen[-1].end = at
        elif seen and seen[-1].end < 0 and depth:
            local = depth.pop()
            if not depth and local == seen[-1].kind:
                seen[-1].kind_end = at

    reader = ooxml.parser(part, Unreadable, start, end)
    ooxml.feed(reader, (data,), part, Unreadable)
    inserts: list[tuple[int, int, bytes]] = []  # (from, to, the bytes there)
    given = 0
    for form in seen:
        # a field the .doc leaves unnamed takes the name of the bookmark around it in LibreOffice's
        queue = fields.get((form.kind, form.name)) or fields.get((form.kind, ""))
        if not form.kind or not queue or ooxml.start_tag(data, form.start, part)[1].group().endswith(b"/>"):
            continue
        wanted = queue.popleft()
        prefix = ooxml.prefix(data, form.start, part)
        for element, attributes in wanted.settings:
            if element not in form.children:
                written = "".join(f' {prefix}{key}="{ooxml.attribute_value(value)}"' for key, value in attributes)
                at = _before(FORM_ORDER, element, form.children, form.end)
                inserts.append((at, at, f"<{prefix}{element}{written}/>".encode()))
                given += 1
        for element, value in wanted.inside:  # LibreOffice swaps a current date's type and a current time's
            if element in form.kind_children and form.kind_values[element] != value:
                tag, tag_end_at = ooxml.retagged(data, form.kind_children[element], part, {f"{prefix}val": value})
                inserts.append((form.kind_children[element], tag_end_at, tag))
                given += 1
        missing = [(element, value) for element, value in wanted.inside if element not in form.kind_children]
        if missing and form.kind_end >= 0:
            order = INPUT_ORDER if form.kind == "textInput" else BOX_ORDER
            tag_end = ooxml.start_tag(data, form.kind_start, part)[1]
            empty = tag_end.group().endswith(b"/>")
            for element, value in missing:
                at = tag_end.end() if empty else _before(order, element, form.kind_children, form.kind_end)
                inserts.append((at, at, f'<{prefix}{element} {prefix}val="{ooxml.attribute_value(value)}"/>'
                                .encode()))
                given += 1
            if empty:
                inserts += [(tag_end.start(), tag_end.end(), b">"),
                            (tag_end.end(), tag_end.end(), f"</{prefix}{form.kind}>".encode())]
    return spliced(data, inserts), given


def _before(order: tuple[str, ...], element: str, children: dict[str, int], end: int) -> int:
    """Where ``element`` goes among ``children`` (local name: where it starts) so that it keeps ``order``: before
    the first child that ``order`` puts after it, else at ``end``."""
    later = order[order.index(element) + 1:]
    return min((at for local, at in children.items() if local in later), default=end)

"""Excel's form controls on an .xls's sheets, put back into the .xlsx as Excel 2007 writes them: VML shapes.

LibreOffice 25.2 loads a sheet's form controls, and its .xlsx export writes check boxes and buttons as Excel does
(not always with the macros they run), and every other kind (option buttons, list and drop-down boxes, spinners,
scroll bars, labels, group boxes) as a drawing shape of no size in the sheet's top left corner, with no control
behind it (``inventory/sheet_controls.py``). Excel keeps a form control as a VML
shape of its legacy drawing whose ``x:ClientData`` names its ``ObjectType`` and holds its state: where it is
(``x:Anchor``), the cell it is linked to (``x:FmlaLink``), the range a list shows (``x:FmlaRange``), whether it is
checked, its limits ([MS-OI29500]; Excel 2010 also writes each in the sheet's ``controls``, which it does not need
to open one).

``mend`` reads each control from its OBJ record ([MS-XLS] 2.4.181: FtCblsData, FtCblsFmla, FtRboData, FtLbsData,
FtSbs, FtSbsFmla, FtGboData), its text from the TXO that follows, and its anchor from the shape the OBJ pairs with,
and writes it into the sheet's VML drawing (LibreOffice's, for comments, or a new one); one in a group goes where
the group places it (``sheet_shapes``). A control is written whole or not at all, and the report then names it: one
whose formulas point at another sheet or a name is left as LibreOffice wrote it. The macro a control runs (a
defined name of the workbook, ``[0]!name``) goes in where the result keeps the VBA project; a check box or button
LibreOffice wrote without its macro is given it.
"""

import html
import posixpath
import re
import struct
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import olefile

from docshift.engine import cfb, ooxml, sheet_drawing, sheet_objects, sheet_shapes
from docshift.engine.embedding import MAX_EDITED_PART, free_name, guarded
from docshift.engine.inventory import xls
from docshift.engine.inventory.package import NS_R, Package
from docshift.engine.inventory.sheet_controls import UI_OBJECT

# FtCmo.ot: the VML ObjectType of each form control written back
KINDS = {0x0B: "Checkbox", 0x0C: "Radio", 0x0E: "Label", 0x10: "Spin", 0x11: "Scroll", 0x12: "List", 0x13: "GBox",
         0x14: "Drop", 0x07: "Button"}
FT_END, FT_MACRO, FT_SBS, FT_SBS_FMLA, FT_GBO_DATA = 0x00, 0x04, 0x0C, 0x0E, 0x0F
FT_RBO_DATA, FT_CBLS_DATA, FT_LBS_DATA, FT_CBLS_FMLA = 0x11, 0x12, 0x13, 0x14
PTG_REF, PTG_AREA = {0x24, 0x44, 0x64}, {0x25, 0x45, 0x65}
PTG_NAME, PTG_NAMEX = {0x23, 0x43, 0x63}, {0x39, 0x59, 0x79}  # a defined name; one through an XTI
WITH_TEXT = {"Button", "Checkbox", "Radio", "Label", "GBox"}
SELECTION = {0: "Single", 1: "Multi", 2: "Extend"}
DROP_STYLE = {0: "Combo", 1: "ComboEdit", 2: "Simple"}
OBJECT_TYPE = re.compile(rb'ObjectType="([A-Za-z]+)"')
VML_SHAPE = re.compile(rb"<v:shape\b.*?</v:shape>", re.S)
SHAPE_ID = re.compile(rb'o:spid="_x0000_s([0-9]+)"')
CONTROL_TYPE = ('<v:shapetype id="_x0000_t201" coordsize="21600,21600" o:spt="201" path="m,l,21600r21600,l21600,xe">'
                '<v:stroke joinstyle="miter"/><v:path shadowok="f" o:extrusionok="f" strokeok="f" fillok="f" '
                'o:connecttype="rect"/><o:lock v:ext="edit" shapetype="t"/></v:shapetype>')


@dataclass
class Control:
    """One form control of a sheet: its VML ObjectType, cell anchor (as ``sheet_objects.Placed``'s), text, the
    elements of its ``x:ClientData`` besides its anchor and its macro, and the macro it runs ("[0]!name", escaped
    for XML; "" for none), and in a group the fraction of the box of ``anchor`` (its outermost group's) it covers."""
    kind: str
    anchor: tuple[int, ...]
    text: str = ""
    data: list[str] = field(default_factory=list)
    macro: str = ""
    within: sheet_shapes.Box | None = None

    @property
    def client_data(self) -> str:
        """Its ``x:ClientData`` elements besides the anchor."""
        return (f"<x:FmlaMacro>{self.macro}</x:FmlaMacro>" if self.macro else "") + "".join(self.data)


def mend(result: Path, source: Path, kind: str, expected: int | None, macros: bool) -> int:
    """Put each form control of the .xls ``source`` into its sheet of ``result`` (LibreOffice's export of it) as
    Excel writes one; ``expected``: how many controls the legacy file holds (the report's ``controls``; nothing is
    read when it holds none); ``macros``: whether the result keeps the VBA project, and so the macros controls run
    (else a control goes in without its macro). Returns how many went in (0: the file is untouched). Never raises
    for what the files hold: a part it cannot read or a sheet it cannot place them on leaves it as LibreOffice
    wrote it."""
    if kind != "xls" or not expected:
        return 0
    return guarded(lambda result, source: _mend(result, source, macros), result, source,
                   "the controls of %s stay as LibreOffice wrote them: %r")


def _mend(result: Path, source: Path, macros: bool) -> int:
    with cfb.CompoundFile(source) as ole:
        sheets = _source_controls(ole, macros)
    if not any(sheets.values()):
        return 0
    return sheet_objects.into_sheets(result, sheets, _sheet)


def _source_controls(ole: olefile.OleFileIO, macros: bool) -> dict[str, list[Control]]:
    """{sheet name, cut as the result's: the form controls of it that can be written whole}."""
    book, budget = sheet_objects.records_of(ole)
    if book is None:
        return {}
    found: dict[str, list[Control]] = {}
    macro = macro_names(book, macros)
    for sheet_index, sheet, pairs in sheet_shapes.paired(book, budget):
        controls = []
        for obj_index, (shape, record) in enumerate(pairs):
            if shape.anchor is None or (shape.member and shape.within is None):
                continue
            control = control_of(record, shape.anchor, book.texts.get((sheet_index, obj_index), ""), macro)
            if control is not None:
                controls.append(control)
                control.within = shape.within
        found[sheet] = controls
    return found


def control_of(record: bytes, anchor: tuple[int, ...], text: str,
               macro: Callable[[bytes], str | None] = lambda _: None) -> Control | None:
    """The form control of the BIFF8 OBJ record ``record`` (its body), or None when it is none or cannot be written
    whole. ``macro(formula)``: the name of the macro an FtMacro's formula runs, "" to leave it out, None when it
    cannot be told."""
    subrecords = sub_records(record)
    if not subrecords or subrecords[0][0] != sheet_objects.FT_CMO or len(subrecords[0][1]) < 6:
        return None
    object_type, _, flags = struct.unpack_from("<HHH", subrecords[0][1])
    kind = KINDS.get(object_type)
    if kind is None or flags & UI_OBJECT:
        return None
    fields = dict(subrecords[1:])
    control = Control(kind, anchor, text if kind in WITH_TEXT else "")
    data = control.data
    if FT_MACRO in fields and formula(fields[FT_MACRO]) != "":  # the macro it runs
        name = macro(fields[FT_MACRO])
        if name is None:
            return None
        control.macro = f"[0]!{sheet_objects.escape(name)}" if name else ""
    if kind in ("Checkbox", "Radio"):
        checked, _, _, cbls_flags = struct.unpack_from("<HHHH", fields.get(FT_CBLS_DATA, bytes(8)).ljust(8, b"\0"))
        data += [f"<x:Checked>{checked}</x:Checked>"] if checked else []
        data += ["<x:NoThreeD/>"] if cbls_flags & 0x0001 else []
        if not _link(fields.get(FT_CBLS_FMLA), data):
            return None
        if kind == "Radio" and struct.unpack_from("<HH", fields.get(FT_RBO_DATA, bytes(4)).ljust(4, b"\0"))[1]:
            data.append("<x:FirstButton/>")
    elif kind in ("List", "Drop"):
        if FT_LBS_DATA not in fields or not _list(fields[FT_LBS_DATA], kind, data):
            return None
        if not _link(fields.get(FT_SBS_FMLA), data):
            return None
    elif kind in ("Spin", "Scroll"):
        sbs = fields.get(FT_SBS, b"").ljust(20, b"\0")
        value, low, high, step, page, horizontal = struct.unpack_from("<hhhhhH", sbs, 4)
        data += [f"<x:Val>{value}</x:Val>", f"<x:Min>{low}</x:Min>", f"<x:Max>{high}</x:Max>",
                 f"<x:Inc>{step}</x:Inc>", f"<x:Page>{page}</x:Page>"] + (["<x:Horiz/>"] if horizontal else [])
        if not _link(fields.get(FT_SBS_FMLA), data):
            return None
    elif kind == "GBox" and struct.unpack_from("<H", fields.get(FT_GBO_DATA, bytes(6)).ljust(6, b"\0"), 4)[0] & 1:
        data.append("<x:NoThreeD/>")
    return control


def macro_names(book: xls._Workbook, keep: bool) -> Callable[[bytes], str | None]:
    """What ``control_of`` asks of a macro: the defined name (a Lbl record of this workbook) that the FtMacro's
    PtgName or PtgNameX names, or "" where the macros are not ``keep``."""
    def name(data: bytes) -> str | None:
        if not keep:
            return ""
        rgce = data[6:6 + (struct.unpack_from("<H", data)[0] & 0x7FFF)] if len(data) >= 6 else b""
        index = None
        if len(rgce) >= 7 and rgce[0] in PTG_NAMEX:
            reference, index = struct.unpack_from("<HI", rgce, 1)
            own = reference < len(book.references) and book.references[reference] < len(book.supbooks) and \
                book.supbooks[book.references[reference]]
            index = index if own else None
        elif len(rgce) >= 5 and rgce[0] in PTG_NAME:
            index = struct.unpack_from("<I", rgce, 1)[0]
        return book.names[index - 1] if index and index <= len(book.names) and book.names[index - 1] else None
    return name


def sub_records(record: bytes) -> list[tuple[int, bytes]]:
    """[(ft, data)] of an OBJ record's subrecords, to its FtEnd. An FtLbsData's size field does not give its size:
    it runs to the record's end."""
    found, position = [], 0
    while position + 4 <= len(record):
        ft, size = struct.unpack_from("<HH", record, position)
        if ft == FT_END:
            break
        end = len(record) if ft == FT_LBS_DATA else position + 4 + size
        found.append((ft, record[position + 4:end]))
        position = end
    return found


def formula(data: bytes | None, sized: bool = False) -> str | None:
    """The reference an ObjFmlaNoSize (an ObjectParsedFormula: cce, 4 unused bytes, its Ptgs), or where ``sized``
    an ObjFmla (cbFmla, then one), holds as A1 text: a cell ("$B$3") or an area ("$A$1:$A$5") of the same sheet;
    "" when it holds none; None for any other formula (another sheet's cells, a name), which is not carried."""
    if sized:
        if not data or len(data) < 2 or struct.unpack_from("<H", data)[0] == 0:
            return ""
        data = data[2:]
    if not data or len(data) < 2 or struct.unpack_from("<H", data)[0] & 0x7FFF == 0:
        return ""
    if len(data) < 6:
        return None
    cce = struct.unpack_from("<H", data)[0] & 0x7FFF
    rgce = data[6:6 + cce]
    if len(rgce) == 5 and rgce[0] in PTG_REF:
        row, column = struct.unpack_from("<HH", rgce, 1)
        return _cell(row, column)
    if len(rgce) == 9 and rgce[0] in PTG_AREA:
        first, last, left, right = struct.unpack_from("<HHHH", rgce, 1)
        return f"{_cell(first, left)}:{_cell(last, right)}"
    return None


def _cell(row: int, column: int) -> str:
    """A cell of a Ptg (its column field's bit 14: the column is relative, bit 15: the row) in A1 notation."""
    index = column & 0x3FFF
    name = xls.COLUMNS[index].decode() if index < len(xls.COLUMNS) else "A"
    return f"{'' if column & 0x4000 else '$'}{name}{'' if column & 0x8000 else '$'}{row + 1}"


def _link(data: bytes | None, elements: list[str]) -> bool:
    """Add the cell an FtCblsFmla or FtSbsFmla links the control to (``x:FmlaLink``); False when it cannot."""
    if data is None:
        return True
    reference = formula(data)
    if reference is None:
        return False
    if reference:
        elements.append(f"<x:FmlaLink>{reference}</x:FmlaLink>")
    return True


def _list(data: bytes, kind: str, elements: list[str]) -> bool:
    """Add what an FtLbsData says of a list or drop-down box: the range it lists, its selection, its lines."""
    if len(data) < 2:
        return False
    size = struct.unpack_from("<H", data)[0]
    reference = formula(data[:2 + size], sized=True)
    rest = data[2 + size:]
    if reference is None or len(rest) < 8:
        return False
    lines, selected, flags, _ = struct.unpack_from("<HHHH", rest)
    if reference:
        elements.append(f"<x:FmlaRange>{reference}</x:FmlaRange>")
    if selected:
        elements.append(f"<x:Sel>{selected}</x:Sel>")
    if flags & 0x0008:
        elements.append("<x:NoThreeD/>")
    if kind == "List":
        elements.append(f"<x:SelType>{SELECTION.get(flags >> 4 & 3, 'Single')}</x:SelType>")
    elif len(rest) >= 14:
        style, drop_lines = struct.unpack_from("<HH", rest, 8)
        elements += [f"<x:DropStyle>{DROP_STYLE.get(style & 3, 'Combo')}</x:DropStyle>",
                     f"<x:DropLines>{drop_lines or lines or 8}</x:DropLines>"]
    return True


def _shape(spid: int, control: Control, column: sheet_drawing.Size, row: sheet_drawing.Size) -> str:
    """The VML shape of ``control``, as Excel 2007 writes a form control."""
    style, anchor = sheet_drawing.place(sheet_drawing.inside(control.anchor, control.within, column, row), column,
                                        row)
    text = ""
    if control.text:
        lines = "<br/>".join(sheet_objects.escape(line) for line in control.text.split("\n"))
        text = (f'<v:textbox style="mso-direction-alt:auto" o:singleclick="f"><div style="text-align:left">'
                f'<font face="Tahoma" size="160" color="auto">{lines}</font></div></v:textbox>')
    return (f'<v:shape id="_x0000_s{spid}" o:spid="_x0000_s{spid}" type="#_x0000_t201" style="{style};'
            f'z-index:{spid % 1024}" filled="f" fillcolor="window [65]" stroked="f" strokecolor="windowText [64]" '
            f'o:insetmode="auto"><v:path shadowok="t" strokeok="t" fillok="t"/><o:lock v:ext="edit" rotation="t"/>'
            f'{text}<x:ClientData ObjectType="{control.kind}"><x:Anchor>{anchor}</x:Anchor>'
            f'<x:AutoFill>False</x:AutoFill><x:AutoLine>False</x:AutoLine>' + control.client_data
            + "</x:ClientData></v:shape>")


def _sheet(package: Package, part: str, index: int, controls: list[Control], lower: set[str],
           edits: dict[str, bytes], added: dict[str, tuple[bytes, str]]) -> int:
    """The ``controls`` written into sheet ``part`` (the ``index``th): its XML, relationships and VML drawing in
    ``edits``, new parts in ``added``; how many went in or were given their macro. LibreOffice writes check boxes
    and buttons itself (a VML shape, and the ``control`` of Excel 2010 with its ``ctrlProp``), not always with their
    macros: a control it wrote is left to it, and given the macro it lacks (``_paired``). 0, and nothing changed,
    where the sheet has a VML drawing the controls cannot join."""
    data = ooxml.checked(ooxml.read(package.zip, package.names[part], MAX_EDITED_PART), part)
    vml_part, vml = None, None  # the sheet's own VML drawing: LibreOffice's for its comments, or the objects'
    legacy = sheet_objects.LEGACY.search(data)
    if legacy is not None:
        vml_part = package.relationships(part).get(legacy.group(1).decode(), ("", None))[1]
        if vml_part is None or vml_part not in package.names:
            return 0
        vml = ooxml.checked(ooxml.read(package.zip, package.names[vml_part], MAX_EDITED_PART), vml_part)
        # LibreOffice writes check boxes and buttons there itself, not always with the macro each runs, and its
        # import drops some: a control it wrote is left to it and given the macro it lacks; one it dropped is
        # written here, where which is which can be told (``_paired``), and the report names the rest
        pairs, dropped = _paired(vml, controls)
        vml, data, macros = _their_macros(vml, data, pairs)
        if macros:
            edits[vml_part], edits[part] = vml, data
        controls = dropped
        if not controls:
            return macros
    elif b"<controls" in data:
        return 0  # controls without a VML drawing: not LibreOffice's, nor Excel's
    else:
        macros = 0
    own: str = vml_part or free_name(lower, "xl/drawings/vmlDrawing{}.vml")
    ids = sheet_drawing.shape_ids(vml, index, len(controls))
    if ids is None:
        return macros
    column, row = sheet_drawing.geometry(data)
    shapes = [_shape(spid, control, column, row) for spid, control in zip(ids, controls)]
    if vml is None:
        rels_part, rels = sheet_objects.rels_of(package, part)
        added[own] = (sheet_drawing.drawing(index, shapes, CONTROL_TYPE), sheet_objects.VML_CONTENT_TYPE)
        legacy_rid = sheet_objects.relationship_ids(rels)()
        sheet_objects.add_relationships(package, rels_part, rels, [(
            legacy_rid, sheet_objects.REL + "vmlDrawing", "../drawings/" + posixpath.basename(own))], edits, added)
        data = sheet_objects.insert_before(data, sheet_objects.AFTER_LEGACY,
                                           f'<legacyDrawing xmlns:r="{NS_R}" r:id="{legacy_rid}"/>'.encode())
        edits[part] = data
    else:
        merged = sheet_drawing.merged(vml, index, shapes, CONTROL_TYPE)
        if merged is None:
            return macros
        edits[own] = merged
    return macros + len(shapes)


def _control_macro(data: bytes, spid: bytes, macro: bytes) -> bytes:
    """The sheet ``data`` whose ``control`` of shape ``spid`` runs ``macro`` (escaped), where its ``controlPr``
    names none."""
    found = re.search(rb'<control\b[^>]*\bshapeId="' + spid + rb'"[^>]*>\s*<controlPr\b(?![^>]*\bmacro=)', data)
    return data if found is None else data[:found.end()] + b' macro="' + macro + b'"' + data[found.end():]


def _paired(vml: bytes, controls: list[Control]) -> tuple[list[tuple[re.Match[bytes], Control]], list[Control]]:
    """(each VML shape LibreOffice wrote of the kinds of ``controls`` with the legacy control it is; the legacy
    controls to write: those of a kind it wrote none of, and those it dropped). Of a kind it wrote as many of, the
    shapes pair in order; of one it wrote fewer of, by their text, where each text is one of a kind on both sides.
    Otherwise which is which cannot be told: none of the kind is paired or written."""
    shapes = list(VML_SHAPE.finditer(vml))
    pairs: list[tuple[re.Match[bytes], Control]] = []
    dropped: list[Control] = []
    for kind in dict.fromkeys(control.kind for control in controls):
        theirs = [shape for shape in shapes if f'ObjectType="{kind}"'.encode() in shape.group()]
        ours = [control for control in controls if control.kind == kind]
        if not theirs or len(theirs) == len(ours):
            pairs += list(zip(theirs, ours))
            dropped += [] if theirs else ours
            continue
        texts = {_text(shape.group()): shape for shape in theirs}
        labels = Counter(_words(control.text) for control in ours)
        if len(theirs) > len(ours) or len(texts) < len(theirs) or "" in texts or max(labels.values()) > 1 or \
                "" in labels or not set(texts) <= set(labels):
            continue
        for control in ours:
            shape = texts.get(_words(control.text))
            if shape is None:
                dropped.append(control)
            else:
                pairs.append((shape, control))
    return pairs, dropped


def _words(text: str) -> str:
    return " ".join(text.split())


def _text(shape: bytes) -> str:
    """The text of a VML shape's text box, its words as ``_words`` gives them."""
    box = re.search(rb"<v:textbox\b.*?</v:textbox>", shape, re.S)
    lines = re.sub(rb"<br\s*/?>", b"\n", box.group()) if box else b""
    return _words(html.unescape(re.sub(rb"<[^>]*>", b"", lines).decode("utf-8", "replace")))


def _their_macros(vml: bytes, data: bytes,
                  pairs: list[tuple[re.Match[bytes], Control]]) -> tuple[bytes, bytes, int]:
    """(the VML drawing ``vml`` and the sheet ``data`` with each control LibreOffice wrote given the macro the legacy
    one it ``pairs`` with runs: an ``x:FmlaMacro``, and the ``macro`` of its ``controlPr``; how many were given one)."""
    edits: list[tuple[int, bytes]] = []  # (where in the VML, what goes in)
    given = 0
    for shape, control in pairs:
        end = shape.group().rfind(b"</x:ClientData>")
        if not control.macro or b"<x:FmlaMacro>" in shape.group() or end < 0:
            continue
        edits.append((shape.start() + end, f"<x:FmlaMacro>{control.macro}</x:FmlaMacro>".encode()))
        spid = SHAPE_ID.search(shape.group())
        if spid is not None:  # its text is escaped as an attribute's would be (sheet_objects.escape)
            data = _control_macro(data, spid.group(1), control.macro.encode())
        given += 1
    for at, text in sorted(edits, reverse=True):
        vml = vml[:at] + text + vml[at:]
    return vml, data, given

"""ActiveX controls on an .xls's sheets, put back into the .xlsx as Excel 2007 writes them.

LibreOffice 25.2 loads an .xls's ActiveX controls (a check box, a command button, a list box of Microsoft Forms
2.0: its ODF export holds each as a form control), and its .xlsx export writes none of them
(``inventory/sheet_controls.py``). In the .xls each is a picture object whose OBJ record's FtPictFmla names its
class ("Forms.CheckBox.1") and where its data lies in the workbook's "Ctls" stream: the control's class id, then
what the control saved of itself ([MS-XLS] 2.5.xxx PictFmlaEmbedInfo; FtPioGrbit.fCtl). Its shape carries its name,
by which the VBA project's event procedures (``CheckBox1_Click``) find it, its cell anchor, and a picture of it.

Excel 2007 keeps one as three things: an ActiveX part (``xl/activeX/activeXN.xml``, ``ax:persistence=
"persistStreamInit"``) whose binary part holds that same class id and data, a ``control`` of the sheet's
``controls`` naming it and its shape id, and a VML shape of type 201 (a host control) in the sheet's legacy drawing
that places it and shows its picture. ``mend`` writes the three for each control, one in a group where the group
places it (``sheet_shapes``), the cells it is linked to (``fmlaLinkedCell``, ``fmlaListFillRange``) in its VML
shape's ``x:FmlaLink`` and ``x:FmlaRange``, as those of a form control. One linked to another sheet's cells is left
out, and the report names it.
"""

import posixpath
import re
import struct
import uuid
from dataclasses import dataclass
from pathlib import Path

import olefile

from docshift.engine import cfb, form_controls, ooxml, pictures, sheet_drawing, sheet_objects, sheet_shapes
from docshift.engine.embedding import MAX_EDITED_PART, MAX_OBJECT, free_name, guarded
from docshift.engine.inventory.common import stream
from docshift.engine.inventory.package import NS_R, Package, relationships_part
from docshift.engine.inventory.sheet_controls import is_control

AX = "http://schemas.microsoft.com/office/2006/activeX"
AX_CONTENT_TYPE, AX_BINARY_CONTENT_TYPE = "application/vnd.ms-office.activeX+xml", "application/vnd.ms-office.activeX"
AX_BINARY = "http://schemas.microsoft.com/office/2006/relationships/activeXControlBinary"
FT_CMO, FT_PICT_FMLA, FT_END = 0x15, 0x09, 0x00
OT_PICTURE = 0x08
CLASS = re.compile(rb"Forms\.([A-Za-z]+)\.[0-9]+|([A-Za-z][A-Za-z0-9]*)\.[A-Za-z0-9.]*")
# what comes after <controls> in CT_Worksheet's sequence
AFTER_CONTROLS = re.compile(rb"<(?:webPublishItems|tableParts|extLst)[\s/>]|</worksheet>")


@dataclass
class ActiveX:
    """One ActiveX control of a sheet: its name, cell anchor (as ``sheet_objects.Placed``'s), what it saved of
    itself (its class id, then its data), its picture (None: none OOXML holds), the ``x:ClientData`` elements of
    the cells it is linked to, and in a group the fraction of the box
    of ``anchor`` (its outermost group's) it covers."""
    name: str
    anchor: tuple[int, ...]
    data: bytes
    image: pictures.Picture | None
    links: list[str]
    within: sheet_shapes.Box | None = None

    @property
    def class_id(self) -> str:
        return "{" + str(uuid.UUID(bytes_le=self.data[:16])).upper() + "}"


def mend(result: Path, source: Path, kind: str, expected: int | None) -> int:
    """Put each ActiveX control of the .xls ``source`` into its sheet of ``result`` (LibreOffice's export of it)
    as Excel 2007 writes one; ``expected``: how many controls the legacy file holds (the report's ``controls``:
    nothing is read when it holds none). Returns how many went in (0: the file is untouched). Never raises for what
    the files hold: a part it cannot read or a sheet it cannot place them on leaves it as LibreOffice wrote it."""
    if kind != "xls" or not expected:
        return 0
    return guarded(_mend, result, source, "the ActiveX controls of %s stay as LibreOffice wrote them: %r")


def _mend(result: Path, source: Path) -> int:
    with cfb.CompoundFile(source) as ole:
        saved = stream(ole, "Ctls")
        sheets = _source_controls(ole, saved) if saved else {}
    if not any(sheets.values()):
        return 0
    return sheet_objects.into_sheets(result, sheets, _sheet)


def _source_controls(ole: olefile.OleFileIO, saved: bytes) -> dict[str, list[ActiveX]]:
    """{sheet name, cut as the result's: its ActiveX controls that can be written whole}."""
    book, budget = sheet_objects.records_of(ole)
    if book is None:
        return {}
    blips = sheet_shapes.blips_of(book.group, budget)
    found: dict[str, list[ActiveX]] = {}
    for _, sheet, pairs in sheet_shapes.paired(book, budget):
        controls: list[ActiveX] = []
        for shape, record in pairs:
            read = _saved(record, saved) if is_control(record) else None
            if read is None or shape.anchor is None or (shape.member and shape.within is None):
                continue
            data, links = read
            controls.append(ActiveX(shape.name or _name(record, len(controls) + 1), shape.anchor, data,
                                    blips.get(shape.pib), links, shape.within))
        found[sheet] = controls
    return found


def _pict_fmla(record: bytes) -> bytes | None:
    """The body of an OBJ record's FtPictFmla, where the record is a picture's."""
    position, picture = 0, False
    while position + 4 <= len(record):
        ft, size = struct.unpack_from("<HH", record, position)
        if ft == FT_CMO and size >= 2:
            picture = struct.unpack_from("<H", record, position + 4)[0] == OT_PICTURE
        elif ft == FT_PICT_FMLA and picture:
            return record[position + 4:position + 4 + size]
        elif ft == FT_END:
            break
        position += 4 + size
    return None


def _saved(record: bytes, saved: bytes) -> tuple[bytes, list[str]] | None:
    """(what the ActiveX control of OBJ record ``record`` saved of itself in the "Ctls" stream ``saved``: its class
    id, then its data; the ``x:ClientData`` elements of the cells it is linked to), or None when either cannot be
    read. A PictFmlaKey follows where the control's data lies: cbKey, its key, then two ObjFmla, the cell it is
    linked to (fmlaLinkedCell) and the range it lists (fmlaListFillRange), each where the control has one."""
    fmla = _pict_fmla(record)
    if fmla is None or len(fmla) < 2:
        return None
    rest = fmla[2 + struct.unpack_from("<H", fmla)[0]:]
    if len(rest) < 8:
        return None
    position, size = struct.unpack_from("<II", rest)
    if size < 16 or size > MAX_OBJECT or position + size > len(saved):
        return None
    data, links, key = saved[position:position + size], [], rest[8:]
    if len(key) >= 4:
        key = key[4 + struct.unpack_from("<I", key)[0]:]
        for element in ("FmlaLink", "FmlaRange"):
            cells = form_controls.formula(key, sized=True)
            if cells is None:
                return None  # another sheet's cells, or a name: not carried
            links += [f"<x:{element}>{cells}</x:{element}>"] if cells else []
            key = key[2 + struct.unpack_from("<H", key)[0]:] if len(key) >= 2 else b""
    return (data, links) if any(data[:16]) else None


def _name(record: bytes, number: int) -> str:
    """A name for a control whose shape has none: its class's ("Forms.CheckBox.1": CheckBox) and ``number``."""
    found = CLASS.search(_pict_fmla(record) or b"")
    return ((found.group(1) or found.group(2)).decode("ascii") if found else "Control") + str(number)


def _shape(spid: int, rid: str, control: ActiveX, column: sheet_drawing.Size, row: sheet_drawing.Size) -> str:
    """The VML shape of ``control``, showing its picture ``rid``, as Excel 2007 writes an ActiveX control's."""
    style, anchor = sheet_drawing.place(sheet_drawing.inside(control.anchor, control.within, column, row), column,
                                        row)
    return (f'<v:shape id="{sheet_objects.escape(control.name)}" o:spid="_x0000_s{spid}" type="#_x0000_t201" '
            f'style="{style};z-index:{spid % 1024}" stroked="f" strokecolor="windowText [64]" o:insetmode="auto">'
            f'<v:imagedata o:relid="{rid}" o:title=""/><x:ClientData ObjectType="Pict"><x:SizeWithCells/>'
            f'<x:Anchor>{anchor}</x:Anchor><x:CF>Pict</x:CF><x:AutoPict/>{"".join(control.links)}</x:ClientData>'
            '</v:shape>')


def _ocx(control: ActiveX) -> bytes:
    """The ActiveX part of ``control``, its data in the binary part of relationship rId1."""
    return ('<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n'
            f'<ax:ocx xmlns:ax="{AX}" xmlns:r="{NS_R}" ax:classid="{control.class_id}" '
            'ax:persistence="persistStreamInit" r:id="rId1"/>').encode()


def _sheet(package: Package, part: str, index: int, controls: list[ActiveX], lower: set[str],
           edits: dict[str, bytes], added: dict[str, tuple[bytes, str]]) -> int:
    """The ``controls`` written into sheet ``part`` (the ``index``th): its XML, relationships and VML drawing in
    ``edits``, new parts in ``added``; how many went in. 0, and nothing changed, where the sheet has a VML drawing
    the controls cannot join, or that holds them already."""
    data = ooxml.checked(ooxml.read(package.zip, package.names[part], MAX_EDITED_PART), part)
    # a control the export wrote itself (as a later LibreOffice may) is not written twice
    named = set(re.findall(rb'<control\b[^>]*\bname="([^"]*)"', data))
    controls = [control for control in controls if sheet_objects.escape(control.name).encode() not in named]
    if not controls:
        return 0
    vml_part, vml = None, None  # the sheet's own VML drawing: LibreOffice's, or the other mends'
    legacy = sheet_objects.LEGACY.search(data)
    if legacy is not None:
        vml_part = package.relationships(part).get(legacy.group(1).decode(), ("", None))[1]
        if vml_part is None or vml_part not in package.names:
            return 0
        vml = ooxml.checked(ooxml.read(package.zip, package.names[vml_part], MAX_EDITED_PART), vml_part)
    ids = sheet_drawing.shape_ids(vml, index, len(controls))
    if ids is None:
        return 0
    rels_part, rels = sheet_objects.rels_of(package, part)
    vml_part = vml_part or free_name(lower, "xl/drawings/vmlDrawing{}.vml")
    vml_rels_part, vml_rels = sheet_objects.rels_of(package, vml_part)
    rid, vml_rid = sheet_objects.relationship_ids(rels), sheet_objects.relationship_ids(vml_rels)
    column, row = sheet_drawing.geometry(data)
    new_rels: list[tuple[str, str, str]] = []
    vml_new_rels: list[tuple[str, str, str]] = []
    parts: dict[str, tuple[bytes, str]] = {}
    elements, shapes = [], []
    for spid, control in zip(ids, controls):
        ocx_part = free_name(lower, "xl/activeX/activeX{}.xml")
        binary = ocx_part[:-len(".xml")] + ".bin"
        lower.add(binary.lower())
        image = control.image or pictures.blank_png()
        image_part = free_name(lower, "xl/media/image{}." + image.extension)
        parts[ocx_part] = (_ocx(control), AX_CONTENT_TYPE)
        parts[binary] = (control.data, AX_BINARY_CONTENT_TYPE)
        sheet_objects.add_relationships(package, relationships_part(ocx_part), b"",
                                        [("rId1", AX_BINARY, posixpath.basename(binary))], edits, parts)
        parts[image_part] = (image.data, image.content_type)
        control_rid, shape_rid = rid(), vml_rid()
        new_rels.append((control_rid, sheet_objects.REL + "control", "../activeX/" + posixpath.basename(ocx_part)))
        vml_new_rels.append((shape_rid, sheet_objects.REL + "image", "../media/" + posixpath.basename(image_part)))
        elements.append(f'<control xmlns:r="{NS_R}" shapeId="{spid}" r:id="{control_rid}" '
                        f'name="{sheet_objects.escape(control.name)}"/>')
        shapes.append(_shape(spid, shape_rid, control, column, row))
    if vml is None:
        parts[vml_part] = (sheet_drawing.drawing(index, shapes, form_controls.CONTROL_TYPE),
                           sheet_objects.VML_CONTENT_TYPE)
        legacy_rid = rid()
        new_rels.append((legacy_rid, sheet_objects.REL + "vmlDrawing", "../drawings/" + posixpath.basename(vml_part)))
        data = sheet_objects.insert_before(data, sheet_objects.AFTER_LEGACY,
                                           f'<legacyDrawing xmlns:r="{NS_R}" r:id="{legacy_rid}"/>'.encode())
    else:
        merged = sheet_drawing.merged(vml, index, shapes, form_controls.CONTROL_TYPE)
        if merged is None:
            return 0
        edits[vml_part] = merged
    # LibreOffice writes the controls it keeps (check boxes, buttons) in a ``controls`` of its own: these join it
    edits[part] = sheet_objects.append_to(data, "controls", AFTER_CONTROLS, elements)
    sheet_objects.add_relationships(package, vml_rels_part, vml_rels, vml_new_rels, edits, parts)
    sheet_objects.add_relationships(package, rels_part, rels, new_rels, edits, parts)
    added.update(parts)
    return len(elements)

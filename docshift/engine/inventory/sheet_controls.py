"""The controls on a workbook's sheets (the report's ``controls``): Excel's form controls (buttons, check boxes, option
buttons, list and combo boxes, spinners, scroll bars, labels, group boxes) and ActiveX controls.

In an .xls each is an OBJ record of the sheet ([MS-XLS] 2.4.181): its FtCmo names the object type, and an ActiveX
control is a picture object whose FtPioGrbit has fCtl (its data in the "Ctls" stream). A drop-down Excel makes for
itself (an AutoFilter's arrows, a data validation's list) has fUIObj set and is no control. In an .xlsx, Excel
writes each control in the sheet's ``controls`` (a ``control`` with its shape id, twice: for Excel 2010 and later,
and a fallback), and a form control also as a VML shape whose ``x:ClientData`` names its ``ObjectType``.
LibreOffice 25.2 loads them and writes none of either: a form control becomes a drawing shape of no size at the top
left corner, an ActiveX control nothing at all.
"""

import re
import struct

from docshift.engine.inventory.package import NS_S, SEP, Package

FT_CMO, FT_PIO_GRBIT, FT_MACRO, FT_END = 0x15, 0x08, 0x04, 0x00
# FtCmo.ot: button, check box, option button, edit box, label, spinner, scroll bar, list box, group box, drop-down
FORM_CONTROLS = {0x07, 0x0B, 0x0C, 0x0D, 0x0E, 0x10, 0x11, 0x12, 0x13, 0x14}
OT_PICTURE = 0x08
UI_OBJECT = 0x0100  # FtCmo.fUIObj: a drop-down of Excel's own
ACTIVEX = 0x0010  # FtPioGrbit.fCtl
CONTROL = f"{NS_S}{SEP}control"
MACRO = re.compile(rb'\smacro="[^"]')  # a shape's macro in a sheet's drawing (DrawingML), where it has one
VML_CONTROL = re.compile(rb'ObjectType\s*=\s*"(?:Button|Checkbox|Radio|Edit|Label|Spin|Scroll|List|GBox|Drop)"')


def is_control(record: bytes) -> bool:
    """Whether the body of a BIFF8 OBJ record is a form control's or an ActiveX control's."""
    if len(record) < 10 or struct.unpack_from("<H", record)[0] != FT_CMO:
        return False
    object_type, _, flags = struct.unpack_from("<HHH", record, 4)
    if object_type in FORM_CONTROLS:
        return not flags & UI_OBJECT
    if object_type != OT_PICTURE:
        return False
    position = 0
    while position + 4 <= len(record):
        subrecord, size = struct.unpack_from("<HH", record, position)
        if subrecord == FT_PIO_GRBIT and size >= 2 and position + 6 <= len(record):
            return bool(struct.unpack_from("<H", record, position + 4)[0] & ACTIVEX)
        if subrecord == FT_END:
            break
        position += 4 + size
    return False


def runs_macro(record: bytes) -> bool:
    """Whether the body of a BIFF8 OBJ record is a drawing shape's (no control's) that runs a macro when clicked: an
    FtMacro whose formula is not empty ([MS-XLS] 2.5.xxx ObjFmla)."""
    if len(record) < 10 or struct.unpack_from("<H", record)[0] != FT_CMO or is_control(record):
        return False
    position = 0
    while position + 4 <= len(record):
        subrecord, size = struct.unpack_from("<HH", record, position)
        if subrecord == FT_MACRO:
            return size >= 2 and position + 6 <= len(record) and \
                struct.unpack_from("<H", record, position + 4)[0] & 0x7FFF > 0
        if subrecord == FT_END:
            break
        position += 4 + size
    return False


def macros_on_shapes(package: Package, drawings: list[str]) -> int:
    """How many shapes of the DrawingML ``drawings`` of a sheet run a macro (a ``macro`` attribute not empty)."""
    return sum(len(MACRO.findall(b"".join(package.chunks(part)))) for part in drawings
               if package.holds(part, b'macro="'))


def in_result(package: Package, sheet: str, vml: list[str], controlled: bool = True) -> int:
    """How many controls the sheet part ``sheet`` of an .xlsx holds, with its VML drawings ``vml``: its distinct
    ``control`` shape ids, or its VML form controls where they are more. ``controlled``: whether the sheet may hold
    a ``control`` at all (False: the reader of its cells found no "<control" in it, and it is not read again)."""
    shapes: set[str] = set()
    if controlled:
        package.parse(sheet, lambda tag, attributes: shapes.add(attributes.get("shapeId", "")) if tag == CONTROL
                      else None)
    drawn = sum(len(VML_CONTROL.findall(b"".join(package.chunks(part)))) for part in vml
                if package.holds(part, b"ObjectType"))
    return max(len(shapes), drawn)

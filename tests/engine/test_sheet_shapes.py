"""The shapes of an .xls's sheet drawing that pair with its OBJ records (``sheet_shapes``): a group's members are
placed where the group puts them, in cells of the sheet (``sheet_drawing.inside``), so that a control or an object
in a group can be written where it stands."""

import struct

from docshift.engine import sheet_drawing, sheet_shapes
from docshift.engine.inventory.common import Budget


def sp(*records):
    return container(0xF004, *records)


def container(rec_type, *records):
    body = b"".join(records)
    return struct.pack("<HHI", 0x000F, rec_type, len(body)) + body


def atom(rec_type, body, instance=0):
    return struct.pack("<HHI", instance << 4, rec_type, len(body)) + body


def test_a_group_s_members_are_placed_where_the_group_puts_them():
    client = atom(0xF011, b"")
    named = atom(0xF00B, struct.pack("<HI", 0x8380, 12) + "Box1\0\0".encode("utf-16-le"), 1)
    drawing = container(0xF002, container(
        0xF003,
        sp(atom(0xF009, struct.pack("<4i", 0, 0, 0, 0))),  # the patriarch
        sp(atom(0xF010, struct.pack("<H8H", 0, 1, 0, 1, 0, 2, 0, 2, 0)), client, named),  # a shape on its own
        container(0xF003,  # a group over C3:G7, its members in a space of 1000 by 1000
                  sp(atom(0xF009, struct.pack("<4i", 0, 0, 1000, 1000)),
                     atom(0xF010, struct.pack("<H8H", 0, 2, 0, 2, 0, 6, 0, 6, 0)), client),
                  sp(atom(0xF00F, struct.pack("<4i", 500, 0, 1000, 500)), client),
                  container(0xF003,  # a group in it, over its lower left quarter, in a space of its own
                            sp(atom(0xF009, struct.pack("<4i", 100, 100, 300, 300)),
                               atom(0xF00F, struct.pack("<4i", 0, 500, 500, 1000)), client),
                            sp(atom(0xF00F, struct.pack("<4i", 100, 100, 200, 200)), client)))))
    shapes = sheet_shapes.client_shapes(bytearray(drawing), Budget())
    assert [(shape.anchor, shape.member, shape.name, shape.within) for shape in shapes] == [
        ((1, 0, 1, 0, 2, 0, 2, 0), False, "Box1", None),
        ((2, 0, 2, 0, 6, 0, 6, 0), True, "", None),  # the group's own shape
        ((2, 0, 2, 0, 6, 0, 6, 0), True, "", (0.5, 0.0, 1.0, 0.5)),
        ((2, 0, 2, 0, 6, 0, 6, 0), True, "", (0.0, 0.5, 0.5, 1.0)),
        ((2, 0, 2, 0, 6, 0, 6, 0), True, "", (0.0, 0.5, 0.25, 0.75))]
    # on a sheet of columns 64 pixels wide and rows 20 points high, cells as Excel counts them
    assert sheet_drawing.inside((2, 0, 2, 0, 6, 0, 6, 0), (0.5, 0.0, 1.0, 0.5), lambda _: 64.0, lambda _: 20.0) == \
        (4, 0, 2, 0, 6, 0, 4, 0)
    assert sheet_drawing.inside((2, 512, 2, 0, 3, 512, 3, 0), (0.25, 0.5, 0.75, 1.0), lambda _: 64.0,
                                lambda _: 20.0) == (2, 768, 2, 128, 3, 256, 3, 0)

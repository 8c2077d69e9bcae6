"""The counts of an Excel 2.x, 3.0 or 4.0 worksheet named .xls: its one sheet and its cells with a value.

Such a file is a bare stream of BIFF2, BIFF3 or BIFF4 records, no compound file, whose first record is a BOF of a
worksheet ([MS-XLS]'s records, older versions of the same; Excel 4.0's workbooks, BIFF4W, hold several and xlrd
reads none). xlrd reads its cells as it reads a later file's (``xls._cells``). The file names no sheet: Excel
calls it after the file, LibreOffice's import after the file (BIFF2) or Sheet1 (BIFF3 and 4), and so does the count
(``Inventory.unnamed_sheet``), so that the formula results restored (``stored``) find their sheet; the report
compares it with the result's one sheet whatever its name.
"""

import struct
from pathlib import Path

from docshift.engine.inventory.common import MAX_STREAM, Budget, Inventory
from docshift.engine.inventory.xls import _cells

BIFF2_BOF, BOFS = 0x0009, {0x0009, 0x0209, 0x0409}  # BIFF2's, BIFF3's and BIFF4's BOF record
WORKSHEET = 0x0010
SHEET = "Sheet1"  # LibreOffice's name of a BIFF3 or 4 worksheet's sheet


def is_worksheet(path: str | Path) -> bool:
    with open(path, "rb") as f:
        head = f.read(8)
    if len(head) < 8:
        return False
    rec_type, length, _, kind = struct.unpack("<HHHH", head)
    return rec_type in BOFS and length >= 4 and kind == WORKSHEET


def read(path: str | Path, inventory: Inventory, budget: Budget) -> None:
    """The sheet and cells of the worksheet ``path``; what cannot be read stays unknown."""
    with open(path, "rb") as f:
        data = f.read(MAX_STREAM + 1)
    if len(data) > MAX_STREAM:
        return
    name = Path(path).stem if data[:2] == BIFF2_BOF.to_bytes(2, "little") else SHEET
    _cells(data, inventory, name)
    if inventory.cells is not None:
        inventory.sheets, inventory.counts["sheets"], inventory.unnamed_sheet = [name], 1, name

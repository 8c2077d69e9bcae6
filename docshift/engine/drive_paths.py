"""Links to a file by a drive letter's path, which LibreOffice's exports make relative to where it converted, put back
as the absolute paths they are.

A legacy file links to another by its path: a hyperlink to ``c:\\docs\\plan.txt``, a formula's reference to
``[E:\\BUDGET\\GX65701.XLS]``. LibreOffice reads such a path as a file URL (``file:///c:/docs/plan.txt``), and its
OOXML export writes each link to a file relative to the folder the converted file is in, on a machine where a drive
letter is no folder of the root's: ``../../../c:/docs/plan.txt``. A plain ``soffice`` does the same, with as many
``../`` as its folder is deep. Office then looks for ``c:`` as a folder beside the converted file, and the link and
the workbook's external references lead nowhere (``56450.xls`` of POI's tests: 290 external workbooks; a hyperlink of
Spreadsheet::ParseExcel's ``TestActiveSheet.xls``).

``mend`` writes each external target of a relationship that climbs out of the package's folders to a drive letter
(``../`` repeated, a letter, a colon) as the file URL it stood for, ``file:///c:/docs/plan.txt``. No relative path
holds a drive letter after its climb: a colon is no character of a Windows file name. Every other byte stays as
LibreOffice wrote it.
"""

import re
from collections.abc import Iterator
from pathlib import Path

from docshift.engine.embedding import PartEdit, edited
from docshift.engine.inventory.package import Package

CLIMB_TO_DRIVE = re.compile(rb'(<Relationship\b[^>]*?\bTarget=")(?:\.\./)+([A-Za-z]:/[^"]*)("[^>]*?'
                            rb'\bTargetMode="External")')
CLIMB_TO_DRIVE_FIRST = re.compile(rb'(<Relationship\b[^>]*?\bTargetMode="External"[^>]*?\bTarget=")(?:\.\./)+'
                                  rb'([A-Za-z]:/[^"]*)(")')


def mend(result: Path, source: Path) -> int:
    """Give each external link of ``result`` to a file by a drive letter's path its absolute path back. Returns how
    many links changed (0: the file is untouched). Never raises for what the file holds."""
    def parts(package: Package) -> Iterator[tuple[str, PartEdit]]:
        for name in package.names:
            if name.endswith(".rels") and package.holds(name, b':/'):
                yield name, absolute

    return edited(result, parts, "the links of %s to drives stay relative: %r", source)


def absolute(data: bytes, _: str) -> tuple[bytes, int]:
    """A relationships part (``data``) whose external targets that climb to a drive letter are file URLs; how many."""
    count = 0
    for pattern in (CLIMB_TO_DRIVE, CLIMB_TO_DRIVE_FIRST):
        data, found = pattern.subn(lambda match: match.group(1) + b"file:///" + match.group(2) + match.group(3), data)
        count += found
    return data, count

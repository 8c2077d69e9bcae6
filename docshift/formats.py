"""The one table of what docshift converts: each legacy type, its family and its OOXML target.

The client, the API, the engine and the object store all read it; nothing else
lists extensions, MIME types or LibreOffice filters.
"""

from dataclasses import dataclass
from pathlib import PurePosixPath


@dataclass(frozen=True)
class Format:
    kind: str             # the legacy extension without its dot, stored on the task row
    name: str             # the program, for messages
    family: str           # LibreOffice's document family that must be found in the file
    target: str           # the OOXML extension of the result
    media_type: str       # the result's Content-Type
    export_filter: str    # LibreOffice's filter that writes the target


FORMATS = {f.kind: f for f in (
    Format("doc", "Word", "writer", "docx",
           "application/vnd.openxmlformats-officedocument.wordprocessingml.document", "MS Word 2007 XML"),
    Format("xls", "Excel", "calc", "xlsx",
           "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", "Calc MS Excel 2007 XML"),
    Format("ppt", "PowerPoint", "impress", "pptx",
           "application/vnd.openxmlformats-officedocument.presentationml.presentation",
           "Impress MS PowerPoint 2007 XML"),
)}

EXTENSIONS = ", ".join(f".{kind}" for kind in FORMATS)  # ".doc, .xls, .ppt", for messages


def by_filename(filename):
    """The Format a file name asks for (its extension, any case), or None."""
    return FORMATS.get(PurePosixPath(filename.lower()).suffix.lstrip("."))


def target_name(filename):
    """``report.DOC`` -> ``report.docx``; None for a name docshift does not convert."""
    found = by_filename(filename)
    return f"{PurePosixPath(filename).stem}.{found.target}" if found else None

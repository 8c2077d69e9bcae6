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
    main_part: str        # the part every package of the target holds


FORMATS = {f.kind: f for f in (
    Format("doc", "Word", "writer", "docx",
           "application/vnd.openxmlformats-officedocument.wordprocessingml.document", "MS Word 2007 XML",
           "word/document.xml"),
    Format("xls", "Excel", "calc", "xlsx",
           "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", "Calc MS Excel 2007 XML",
           "xl/workbook.xml"),
    Format("ppt", "PowerPoint", "impress", "pptx",
           "application/vnd.openxmlformats-officedocument.presentationml.presentation",
           "Impress MS PowerPoint 2007 XML", "ppt/presentation.xml"),
)}


def by_filename(filename):
    """The Format a file name asks for (its extension, any case), or None."""
    return FORMATS.get(PurePosixPath(filename.lower()).suffix.lstrip("."))


def target_name(filename):
    """``report.DOC`` -> ``report.docx``; None for a name docshift does not convert."""
    found = by_filename(filename)
    return f"{PurePosixPath(filename).stem}.{found.target}" if found else None


# LibreOffice's type names (its TypeDetection registry) -> the stable short name a task shows as
# ``detected_format``. Template twins (``*_Vorlage``, ``*_VorlageTemplate``, ``* Template``) are the
# same bytes under another extension and share their type's name; an unlisted type gets a name
# derived from its own (see ``detected_format``).
DETECTED_FORMATS = {
    "writer_MS_Word_97": "word-97",
    "writer_MS_Word_95": "word-6-95",
    "writer_MS_WinWord_60": "word-6-95",
    "writer_MS_WinWord_5": "word-2-5",
    "writer_DosWord": "word-dos",
    "writer_Mac_Word": "word-mac",
    "writer_MS_Word_2003_XML": "wordml-2003",
    "writer_Rich_Text_Format": "rtf",
    "calc_Rich_Text_Format": "rtf",
    "generic_HTML": "html",
    "calc_HTML": "html",
    "writer_web_HTML": "html",
    "XHTML_File": "html",
    "writer_WordPerfect_Document": "wordperfect",
    "writer_MS_Works_Document": "works",
    "writer_Mac_Works": "works",
    "calc_MS_Works_Document": "works",
    "calc_Mac_Works": "works",
    "writer_MS_Write": "write",
    "writer_LotusWordPro_Document": "lotus-word-pro",
    "calc_MS_Excel_97": "excel-biff8",
    "calc_MS_Excel_95": "excel-biff5",
    "calc_MS_Excel_5095": "excel-biff5",
    "calc_MS_Excel_40": "excel-biff2-4",
    "calc_MS_Excel_2003_XML": "spreadsheetml-2003",
    "calc_Lotus": "lotus",
    "calc_WPS_Lotus_Document": "lotus",
    "calc_QPro": "quattro",
    "calc_WPS_QPro_Document": "quattro",
    "calc_SYLK": "sylk",
    "calc_DIF": "dif",
    "calc_dBase": "dbase",
    "impress_MS_PowerPoint_97": "powerpoint-97",
    "impress_MS_PowerPoint_97_AutoPlay": "powerpoint-97",
    "impress_PowerPoint3": "powerpoint-4",
    "generic_Text": "text",
    "pdf_Portable_Document_Format": "pdf",
}
# prefixes and suffixes that say which program imports a type or that it is a template
_TYPE_PREFIXES = ("writer_", "calc_", "impress_", "draw_", "generic_")
_TEMPLATE_SUFFIXES = ("_VorlageTemplate", "_Vorlage", "_Template", " Template")


def detected_format(type_name, media_type=""):
    """The stable short name of what LibreOffice's type detection found (``word-97``, ``rtf``,
    ``excel-biff5``, ``ooxml``, ``image``...); ``unknown`` when it found nothing."""
    if not type_name:
        return "unknown"
    for suffix in _TEMPLATE_SUFFIXES:
        type_name = type_name.removesuffix(suffix)
    if type_name in DETECTED_FORMATS:
        return DETECTED_FORMATS[type_name]
    lowered = type_name.lower()
    if "2007" in lowered or "ooxml" in lowered or "office open xml" in lowered:
        return "ooxml"
    if lowered in ("writer8", "calc8", "impress8", "draw8", "writerglobal8") or "flatxml" in lowered \
            or "staroffice_xml" in lowered:
        return "opendocument"
    if media_type.startswith("image/"):
        return "image"
    for prefix in _TYPE_PREFIXES:
        lowered = lowered.removeprefix(prefix)
    name = "".join(c if c.isalnum() else "-" for c in lowered)
    return "-".join(part for part in name.split("-") if part) or "unknown"

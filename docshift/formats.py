"""The one table of what docshift converts: each legacy type, its family and its OOXML target.

The client, the API, the engine and the object store all read it; nothing else
lists extensions, MIME types or LibreOffice filters.
"""

import re
import unicodedata
from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """One OOXML type a legacy file converts to: plain, or its macro-enabled sibling."""
    extension: str        # of the result: docx, docm, ...
    media_type: str       # the result's Content-Type
    export_filter: str    # LibreOffice's filter that writes it


@dataclass(frozen=True)
class Format:
    kind: str             # the legacy extension without its dot, stored on the task row
    name: str             # the program, for messages
    family: str           # LibreOffice's document family that must be found in the file
    plain: Target         # what a file without macros (or with macros removed on request) becomes
    macro_enabled: Target  # what a file with a VBA project becomes, its modules kept
    main_part: str        # the part every package of either target holds
    legacy_filter: str    # LibreOffice's filter that writes the legacy type (the engine's self-test makes one)

    @property
    def target(self) -> str:
        return self.plain.extension

    @property
    def export_filter(self) -> str:
        return self.plain.export_filter

    def result(self, macros: bool) -> Target:
        """The Target of a result that carries a VBA project (``macros``) or not."""
        return self.macro_enabled if macros else self.plain


FORMATS = {f.kind: f for f in (
    Format("doc", "Word", "writer",
           Target("docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
                  "MS Word 2007 XML"),
           Target("docm", "application/vnd.ms-word.document.macroEnabled.12", "MS Word 2007 XML VBA"),
           "word/document.xml", "MS Word 97"),
    Format("xls", "Excel", "calc",
           Target("xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
                  "Calc MS Excel 2007 XML"),
           Target("xlsm", "application/vnd.ms-excel.sheet.macroEnabled.12", "Calc MS Excel 2007 VBA XML"),
           "xl/workbook.xml", "MS Excel 97"),
    Format("ppt", "PowerPoint", "impress",
           Target("pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation",
                  "Impress MS PowerPoint 2007 XML"),
           # LibreOffice writes an empty VBA project here: the engine puts the source's own in (``vba.py``)
           Target("pptm", "application/vnd.ms-powerpoint.presentation.macroEnabled.12",
                  "Impress MS PowerPoint 2007 XML VBA"),
           "ppt/presentation.xml", "MS PowerPoint 97"),
)}
# every result extension -> its Content-Type
MEDIA_TYPES = {t.extension: t.media_type for f in FORMATS.values() for t in (f.plain, f.macro_enabled)}


def self_test_kinds() -> list[list[str]]:
    """What the engine's self-test makes and converts, one per family, as plain JSON for the bridge
    (which runs under LibreOffice's Python and cannot import this): [family, legacy filter, file
    name, OOXML filter]."""
    return [[f.family, f.legacy_filter, f"selftest.{f.kind}", f.export_filter] for f in FORMATS.values()]


NAME_BYTES = 255  # the longest file name, in bytes, of the file systems a result is saved on (NAME_MAX)


def by_filename(filename: str) -> Format | None:
    """The Format a file name asks for (what follows its last dot, any case), or None. ``.doc`` alone asks for
    one too: it ends in .doc, though a path library reads it as a hidden file's name with no extension."""
    _, dot, extension = filename.lower().rpartition(".")
    return FORMATS.get(extension) if dot and "/" not in extension else None


def target_name(filename: str, extension: str | None = None) -> str | None:
    """``report.DOC`` -> ``report.docx`` (or ``report.docm`` with that ``extension``); None for a name docshift
    does not convert. A stem too long for a file name with its new extension (``NAME_BYTES`` in UTF-8, as a
    255-byte ``.doc``'s is) is cut, at a character's end: a result's name is always one a disk can hold."""
    found = by_filename(filename)
    if found is None:
        return None
    extension = extension or found.target
    stem = filename.rpartition(".")[0] or "converted"
    # a name of bytes that are no UTF-8 (a file's on Linux) holds them as surrogates: kept, as the bytes they are
    while len(stem.encode(errors="surrogateescape")) > NAME_BYTES - 1 - len(extension):
        stem = stem[:-1]
    return f"{stem}.{extension}"


# The customer's name for the job file: letters, digits and marks of any script, and this punctuation;
# nothing special in a path or a file URL (/ \ % # ? :). Other characters become "_".
SAFE_PUNCTUATION = " -_.,()[]+&'!@~"
SOURCE_STEM_BYTES = 120
SOURCE_FALLBACK = "document"


def source_name(filename: str | None, kind: str) -> str:
    """The name LibreOffice gets the source under: the stem of the customer's ``filename`` made safe
    (``Budget 2024.xls`` stays), the extension always ``kind``; ``document.<kind>`` when nothing is left."""
    name = unicodedata.normalize("NFC", filename or "")
    stem = name.rpartition(".")[0] if "." in name else name
    stem = "".join(c if unicodedata.category(c)[0] in "LNM" or c in SAFE_PUNCTUATION else "\0" for c in stem)
    stem = re.sub("\0+", "_", stem)  # a run of unsafe characters becomes one "_"
    stem = stem.encode()[:SOURCE_STEM_BYTES].decode(errors="ignore").strip(" .")
    if not any(unicodedata.category(c)[0] in "LN" for c in stem):
        stem = SOURCE_FALLBACK
    return f"{stem}.{kind}"


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
    "web_archive": "mht",  # not LibreOffice's: a Word or Excel MHT page, unpacked for it (engine/uno/webarchive.py)
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


def detected_format(type_name: str | None, media_type: str = "") -> str:
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

"""What a legacy file says of itself in its property sets that LibreOffice drops: its company, manager and category
(DocumentSummaryInformation), which it never imports, and its title, subject, author, keywords, comments and last
author (SummaryInformation), which its Excel 95 import leaves out (``engine/doc_properties.py`` puts them into the
result)."""

STREAM, SUMMARY = "\x05DocumentSummaryInformation", "\x05SummaryInformation"
CODE_PAGE = 0x0001
CORE, APP = "docProps/core.xml", "docProps/app.xml"
CORE_NS = "http://schemas.openxmlformats.org/package/2006/metadata/core-properties"
APP_NS = "http://schemas.openxmlformats.org/officeDocument/2006/extended-properties"
DC = "http://purl.org/dc/elements/1.1/"
# each property's id in its property set ([MS-OLEPS] 2.18.4, [MS-OSHARED] 2.3.3.2.1.1 and 2.3.3.2.2.1), and the part
# of the result that keeps it, and its element there (namespace, local name)
IDS = {STREAM: {0x0002: "category", 0x000E: "Manager", 0x000F: "Company"},
       SUMMARY: {0x0002: "title", 0x0003: "subject", 0x0004: "creator", 0x0005: "keywords", 0x0006: "description",
                 0x0008: "lastModifiedBy"}}
PROPERTIES = {"category": (CORE, CORE_NS), "Manager": (APP, APP_NS), "Company": (APP, APP_NS), "title": (CORE, DC),
              "subject": (CORE, DC), "creator": (CORE, DC), "keywords": (CORE, CORE_NS), "description": (CORE, DC),
              "lastModifiedBy": (CORE, CORE_NS)}
LONGEST = 1024  # characters: a property longer than a paragraph is a damaged stream's, not a company's name


def read(ole: object) -> dict[str, str]:
    """{the result's element (``PROPERTIES``): its text} of each property an OLE file (``olefile.OleFileIO``) names.
    Never raises: a stream that does not read names nothing."""
    texts = {}
    for stream, ids in IDS.items():
        try:
            found = ole.getproperties(stream)  # type: ignore[attr-defined]
        except Exception:  # no such stream, or one that does not parse
            continue
        code_page = found.get(CODE_PAGE)
        for key, element in ids.items():
            value = found.get(key)
            text = value if isinstance(value, str) else _decoded(value, code_page) if isinstance(value, bytes) \
                else None
            text = (text or "").replace("\x00", "").strip()
            if text and len(text) <= LONGEST and text.isprintable():
                texts[element] = text
    return texts


def _decoded(value: bytes, code_page: object) -> str | None:
    """An 8-bit string property in the property set's ``code_page`` (1200: UTF-16, as some writers give it)."""
    number = code_page & 0xFFFF if isinstance(code_page, int) else 1252  # a VT_I2: 65001 reads as -535
    codec = {1200: "utf-16-le", 65001: "utf-8"}.get(number, f"cp{number}")
    try:
        return value.decode(codec)
    except (LookupError, UnicodeDecodeError):
        return value.decode("cp1252", errors="replace")

"""The company, manager and category a legacy file names in its DocumentSummaryInformation, which LibreOffice does
not import (``engine/doc_properties.py`` puts them into the result)."""

STREAM = "\x05DocumentSummaryInformation"
CODE_PAGE = 0x0001
# PIDDSI_CATEGORY, PIDDSI_MANAGER, PIDDSI_COMPANY ([MS-OLEPS] 2.18.4 / [MS-OSHARED] 2.3.3.2.1.1): the part of the
# result that keeps each, and its element there
PROPERTIES = {0x0002: ("docProps/core.xml", "category"), 0x000E: ("docProps/app.xml", "Manager"),
              0x000F: ("docProps/app.xml", "Company")}
LONGEST = 1024  # characters: a property longer than a paragraph is a damaged stream's, not a company's name


def read(ole: object) -> dict[int, str]:
    """{property id: its text} of the company, manager and category an OLE file (``olefile.OleFileIO``) names.
    Never raises: a stream that does not read names nothing."""
    try:
        found = ole.getproperties(STREAM)  # type: ignore[attr-defined]
    except Exception:  # no such stream, or one that does not parse
        return {}
    code_page = found.get(CODE_PAGE)
    texts = {}
    for key in PROPERTIES:
        value = found.get(key)
        text = value if isinstance(value, str) else _decoded(value, code_page) if isinstance(value, bytes) else None
        text = (text or "").replace("\x00", "").strip()
        if text and len(text) <= LONGEST and text.isprintable():
            texts[key] = text
    return texts


def _decoded(value: bytes, code_page: object) -> str | None:
    """An 8-bit string property in the property set's ``code_page`` (1200: UTF-16, as some writers give it)."""
    number = code_page & 0xFFFF if isinstance(code_page, int) else 1252  # a VT_I2: 65001 reads as -535
    codec = {1200: "utf-16-le", 65001: "utf-8"}.get(number, f"cp{number}")
    try:
        return value.decode(codec)
    except (LookupError, UnicodeDecodeError):
        return value.decode("cp1252", errors="replace")

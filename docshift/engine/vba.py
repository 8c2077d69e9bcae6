"""VBA projects in Office files: read their modules, find them in legacy files, carry them into the result.

LibreOffice rewrites the VBA project of a .doc or .xls when it saves .docm/.xlsm, and for a .ppt it writes a
``ppt/vbaProject.bin`` with no project in it: ``ppt_project`` takes the project out of the .ppt (``vbaproject``
out of a .doc/.xls) and ``insert_project`` puts it into LibreOffice's package. Nothing here runs a macro: olevba
only reads and decompresses the source code.
"""

import logging
import struct
import warnings
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.dom import minidom

import olefile

from docshift.engine import cfb, ooxml, vbaproject
from docshift.engine.cfb import CompoundFile

# oletools builds its pyparsing grammar at import time with names pyparsing now deprecates
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from oletools import olevba

# oletools' loggers are silent until something enables them; make sure they stay so in the service
for _name in ("olevba", "ppt", "crypto", "ooxml", "record_base", "oleform"):
    logging.getLogger(_name).setLevel(logging.CRITICAL + 1)

MODULE_EXTENSIONS = {"bas", "cls", "frm", "vba"}  # what olevba appends to a module's name; "vba" when unknown


def modules(path: str | Path | bytes | bytearray) -> dict[str, str]:
    """{module name: source code} of the VBA project(s) in ``path``: a legacy .doc/.xls/.ppt, an OOXML
    .docm/.xlsm/.pptm or a bare vbaProject.bin (a path, or the file's bytes). Empty when there is none or it
    cannot be read; never raises. Only reads the project: olevba decompresses the source, it runs nothing."""
    found: dict[str, str] = {}
    try:
        # no P-code disassembly: only the source is wanted, and pcodedmp makes olevba switch its logging back on
        if isinstance(path, (bytes, bytearray)):
            parser = olevba.VBA_Parser("vbaProject.bin", data=bytes(path), disable_pcode=True)
        else:
            parser = olevba.VBA_Parser(str(path), disable_pcode=True)
    except Exception:  # not an Office file, damaged, encrypted: no project to read
        return found
    try:
        if parser.type in (olevba.TYPE_TEXT, olevba.TYPE_SLK):  # plain text or SYLK: olevba's guess, not a project
            return found
        for _, stream_path, vba_filename, code in parser.extract_macros():
            name, _, ext = vba_filename.rpartition(".")
            # skip olevba's extras: XLM macros, its P-code listing, code found in orphan streams
            if not name or ext.lower() not in MODULE_EXTENSIONS or stream_path in ("xlm_macro", "VBA P-code"):
                continue
            found[name] = code
    except Exception:  # a project olevba cannot parse to the end: keep the modules read so far
        pass
    finally:
        try:
            parser.close()
        except Exception:  # closing a half-opened parser must not turn into an error
            pass
    return found


# --- legacy files: is there a project? ---------------------------------------------------------------------------

# [MS-PPT] record types on the way from the Current User stream to the VBA project storage
RT_CURRENT_USER_ATOM = 0x0FF6
RT_USER_EDIT_ATOM = 0x0FF5
RT_PERSIST_DIRECTORY_ATOM = 0x1772
RT_DOCUMENT = 0x03E8
RT_LIST = 0x07D0  # DocInfoListContainer
RT_VBA_INFO = 0x03FF
RT_VBA_INFO_ATOM = 0x0400
RT_EXTERNAL_OLE_OBJECT_STG = 0x1011  # VbaProjectStg: instance 1 compressed, 0 not
HEADER_TOKEN_ENCRYPTED = 0xF3D1C4DF  # CurrentUserAtom.headerToken of an encrypted file: its records are unreadable


def has_project(path: str | Path, kind: str) -> bool:
    """Does the legacy file ``path`` of ``kind`` "doc", "xls" or "ppt" carry a VBA project? Fast: reads the OLE
    directory and, for a .ppt, the few records that lead to the project, not the streams; of an OOXML package so
    named (a .docm), its vbaProject.bin part. Never raises: False for damaged or other input (RTF, HTML)."""
    try:
        if not olefile.isOleFile(str(path)):
            return vbaproject.package_project(path, kind) is not None
        with CompoundFile(path) as ole:
            if kind == "doc":
                return ole.get_type("Macros/VBA") == olefile.STGTY_STORAGE  # olefile compares names case-insensitively
            if kind == "xls":
                return ole.get_type("_VBA_PROJECT_CUR/VBA") == olefile.STGTY_STORAGE
            if kind == "ppt":
                return _ppt_project_record(ole) is not None
    except Exception:  # olefile and the record walk raise on damaged files: no project to speak of
        pass
    return False


class _Stream:
    """Random access to one OLE stream that reads only the sectors asked for (olefile's ``openstream`` reads the
    whole stream, several milliseconds for a large .ppt)."""

    def __init__(self, ole: olefile.OleFileIO, name: str) -> None:
        storage = ole.root
        if getattr(ole, "dual", False) and name.lower() in cfb.DUAL_STREAMS:  # a deck for PowerPoint 95 and 97
            storage = next(kid for kid in ole.root.kids if kid.name == cfb.DUAL_STORAGE)
        entry = next((kid for kid in storage.kids if kid.name.lower() == name.lower()), None)
        if entry is None or entry.entry_type != olefile.STGTY_STREAM:
            raise ValueError(f"no stream {name!r}")
        self.ole, self.size = ole, entry.size
        self.data: bytes | None = None
        if entry.size < ole.minisectorcutoff:  # small streams live in the mini stream: olefile reads them cheaply
            self.data = ole.openstream(entry.name).read()
        self.chain = [entry.isectStart]  # sector numbers, followed through the FAT only as far as reads need
        self.max_sectors = -(-entry.size // ole.sectorsize)

    def _sector(self, index: int) -> int:
        while len(self.chain) <= index:
            sect = self.chain[-1]
            if len(self.chain) >= self.max_sectors or sect >= len(self.ole.fat):
                raise ValueError("sector chain shorter than the stream")
            self.chain.append(self.ole.fat[sect])
        return self.chain[index]

    def read(self, offset: int, size: int) -> bytes:
        """``size`` bytes at ``offset``; ValueError when the stream ends before."""
        if offset < 0 or size < 0 or offset + size > self.size:
            raise ValueError("read past the end of the stream")
        if self.data is not None:
            return self.data[offset:offset + size]
        sectorsize, out = self.ole.sectorsize, bytearray()
        while len(out) < size:
            index, within = divmod(offset + len(out), sectorsize)
            out += self.ole.getsect(self._sector(index))[within:within + size - len(out)]
        return bytes(out)

    def header(self, offset: int) -> tuple[int, int, int, int]:
        """(recVer, recInstance, recType, recLen) of the [MS-PPT] record header at ``offset``."""
        ver_instance, rec_type, rec_len = struct.unpack("<HHI", self.read(offset, 8))
        return ver_instance & 0x0F, ver_instance >> 4, rec_type, rec_len


def _ppt_project_record(ole: olefile.OleFileIO) -> tuple[_Stream, int] | None:
    """(stream, offset) of the VbaProjectStg record in the "PowerPoint Document" stream that the document's
    VBAInfoAtom refers to, or None. Follows [MS-PPT] 2.1.2: Current User -> newest UserEditAtom -> persist object
    directory (every edit's PersistDirectoryAtom, newer entries winning) -> DocumentContainer -> DocInfoListContainer
    -> VBAInfoContainer -> VBAInfoAtom.persistIdRef -> the record at that persist object's offset."""
    current = _Stream(ole, "Current User").read(0, 20)
    _, rec_type, _ = struct.unpack("<HHI", current[:8])
    _, token, offset = struct.unpack("<III", current[8:20])
    if rec_type != RT_CURRENT_USER_ATOM or token == HEADER_TOKEN_ENCRYPTED:
        return None
    stream = _Stream(ole, "PowerPoint Document")
    directory: dict[int, int] = {}
    doc_ref = None
    while offset:
        if stream.header(offset)[2] != RT_USER_EDIT_ATOM:
            return None
        # UserEditAtom after the header: lastSlideIdRef, version/minor/major, offsetLastEdit, offsetPersistDirectory,
        # docPersistIdRef
        last_edit, persist_offset, edit_doc_ref = struct.unpack("<III", stream.read(offset + 16, 12))
        doc_ref = edit_doc_ref if doc_ref is None else doc_ref  # the newest edit names the live document
        _, _, rec_type, rec_len = stream.header(persist_offset)
        if rec_type != RT_PERSIST_DIRECTORY_ATOM:
            return None
        entries = stream.read(persist_offset + 8, rec_len)
        pos = 0
        while pos + 4 <= len(entries):
            # PersistDirectoryEntry: 20-bit first persist id, 12-bit count, then that many 4-byte offsets
            (word,) = struct.unpack_from("<I", entries, pos)
            first, count = word & 0xFFFFF, word >> 20
            offsets = struct.unpack_from(f"<{count}I", entries, pos + 4)
            for i, object_offset in enumerate(offsets):
                directory.setdefault(first + i, object_offset)  # walking newest to oldest: the first seen is live
            pos += 4 + 4 * count
        # each save's edit points back to an earlier one ([MS-PPT] 2.3.3); damaged files loop (57272_corrupted...)
        offset = last_edit if last_edit < offset else 0
    if doc_ref not in directory:
        return None
    atom = _vba_info_atom(stream, directory[doc_ref])
    if atom is None:
        return None
    persist_id, has_macros = struct.unpack_from("<II", atom)
    if not has_macros or persist_id not in directory:  # fHasMacros 0: the project storage is empty
        return None
    if stream.header(directory[persist_id])[2] != RT_EXTERNAL_OLE_OBJECT_STG:
        return None
    return stream, directory[persist_id]


def _vba_info_atom(stream: _Stream, doc_offset: int) -> bytes | None:
    """The body of the VBAInfoAtom in the DocumentContainer at ``doc_offset``, or None. Reads only record
    headers: the DocInfoListContainer comes right after the master list, long before the slides."""
    _, _, rec_type, rec_len = stream.header(doc_offset)
    if rec_type != RT_DOCUMENT:
        return None
    for child_type, child_offset, child_len in _children(stream, doc_offset + 8, rec_len):
        if child_type != RT_LIST:
            continue
        for info_type, info_offset, info_len in _children(stream, child_offset + 8, child_len):
            if info_type != RT_VBA_INFO:
                continue
            for atom_type, atom_offset, atom_len in _children(stream, info_offset + 8, info_len):
                if atom_type == RT_VBA_INFO_ATOM and atom_len >= 12:
                    return stream.read(atom_offset + 8, 12)
        return None
    return None


def _children(stream: _Stream, start: int, length: int) -> Iterator[tuple[int, int, int]]:
    """(recType, offset, recLen) of each record in a container's body of ``length`` bytes at ``start``."""
    pos, end = start, min(start + length, stream.size)
    while pos + 8 <= end:
        _, _, rec_type, rec_len = stream.header(pos)
        yield rec_type, pos, rec_len
        pos += 8 + rec_len


# --- .ppt -> .pptm ----------------------------------------------------------------------------------------------

MAX_PROJECT_SIZE = 64 << 20  # VBA projects are kilobytes; a larger declared size is a damaged or hostile file
MAX_EDITED_PART = 16 << 20  # the parts insert_project edits: kilobytes, a few MB for 10,000 slides
PROJECT_CONTENT_TYPE = "application/vnd.ms-office.vbaProject"
# per kind: the project's part, the main part's relationships, the main part (unless _rels/.rels says) and its type
PACKAGES = {"ppt": ("ppt/vbaProject.bin", "ppt/_rels/presentation.xml.rels", "/ppt/presentation.xml",
                    "application/vnd.ms-powerpoint.presentation.macroEnabled.main+xml"),
            "doc": ("word/vbaProject.bin", "word/_rels/document.xml.rels", "/word/document.xml",
                    "application/vnd.ms-word.document.macroEnabled.main+xml"),
            "xls": ("xl/vbaProject.bin", "xl/_rels/workbook.xml.rels", "/xl/workbook.xml",
                    "application/vnd.ms-excel.sheet.macroEnabled.main+xml")}
VBA_RELATIONSHIP = "http://schemas.microsoft.com/office/2006/relationships/vbaProject"
OFFICE_DOCUMENT = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"
CT_NS = "http://schemas.openxmlformats.org/package/2006/content-types"
REL_NS = "http://schemas.openxmlformats.org/package/2006/relationships"


def ppt_project(path: str | Path) -> bytes | None:
    """The VBA project of the .ppt ``path`` as the bytes of a vbaProject.bin (an OLE compound file with the ``VBA``
    storage and the ``PROJECT``/``PROJECTwm`` streams, as a .pptm holds it), or None when it has none or it cannot
    be read. The .ppt keeps the project as the VbaProjectStg record its VBAInfoAtom names: a whole compound file,
    zlib-compressed after a 4-byte decompressed size (recInstance 1) or stored as is (0). Its root already has
    vbaProject.bin's layout, so it is returned as it inflates. Never raises."""
    try:
        if not olefile.isOleFile(str(path)):
            return None
        with CompoundFile(path) as ole:
            found = _ppt_project_record(ole)
            if found is None:
                return None
            stream, offset = found
            _, instance, _, rec_len = stream.header(offset)
            if rec_len > MAX_PROJECT_SIZE:
                return None
            body = stream.read(offset + 8, rec_len)
        if instance == 1:
            (size,) = struct.unpack_from("<I", body)
            if size > MAX_PROJECT_SIZE:
                return None
            # a decompressobj, not zlib.decompress: PowerPoint may leave the zlib stream without its end (59302.ppt)
            data = zlib.decompressobj().decompress(body[4:], size)
            if len(data) != size:
                return None
        else:
            data = body
        return data if vbaproject.is_project(data) else None
    except Exception:  # damaged records, a storage that does not inflate: no project to carry over
        return None


def insert_project(package_path: str | Path, project: bytes, kind: str = "ppt") -> None:
    """Put ``project`` (a vbaProject.bin's bytes) into the .pptm, .docm or .xlsm (``kind`` "ppt", "doc", "xls")
    ``package_path`` as its vbaProject.bin (``PACKAGES``), replacing the one LibreOffice writes (a .pptm's has no
    project in it, a .docm's and .xlsm's is LibreOffice's rewrite). Every other part is kept byte for byte, except
    that [Content_Types].xml and the main part's relationships get what a macro-enabled package needs when they
    lack it (LibreOffice 25.2 already writes all of it). Writes a new file next to the package and moves it over
    atomically. The parts are copied a chunk at a time, never past the size they declare: the caller has bounded
    those from the zip's directory (``convert.check_package``). Raises ValueError when ``project`` is not a VBA
    project, ``ooxml.Unreadable`` for a part it edits that declares a DTD, is not well-formed or is larger than
    ``MAX_EDITED_PART``, and zipfile's or the OS's errors for a package it cannot read or write."""
    project = bytes(project)
    if not vbaproject.is_project(project):
        raise ValueError("not a vbaProject.bin: no PROJECT stream and VBA storage")
    package_path = Path(package_path)
    with zipfile.ZipFile(package_path) as src:
        infos = src.infolist()
        # part names in a package compare case-insensitively ([MS-OPC]); find the ones to touch whatever their case
        names = {info.filename.lower(): info for info in infos}

        def part(name: str) -> bytes | None:
            info = names.get(name)
            if info is None:
                return None
            # minidom expands entities: it reads only what the DTD-refusing parser let through
            return ooxml.checked(ooxml.read(src, info, MAX_EDITED_PART), info.filename)

        def real_name(name: str, default: str) -> str:
            return names[name].filename if name in names else default

        project_part, rels_part, main, main_type = PACKAGES[kind]
        main = _main_part(part("_rels/.rels"), main)
        edits: dict[str, bytes] = {}
        types = _content_types(part("[content_types].xml"), "/" + project_part, main, main_type)
        if types is not None:
            edits[real_name("[content_types].xml", "[Content_Types].xml")] = types
        rels = _relationships(part(rels_part.lower()), project_part)
        if rels is not None:
            edits[real_name(rels_part.lower(), rels_part)] = rels
        edits[real_name(project_part.lower(), project_part)] = project
        existing = {info.filename for info in infos}
        ooxml.rewrite(src, package_path, edits, {name: data for name, data in edits.items() if name not in existing})


def _main_part(rels: bytes | None, default: str) -> str:
    """Part name (with leading slash) of the package's main part from _rels/.rels; ``default`` if unsaid."""
    if rels:
        for rel in minidom.parseString(rels).getElementsByTagNameNS(REL_NS, "Relationship"):
            if rel.getAttribute("Type") == OFFICE_DOCUMENT and rel.getAttribute("Target"):
                return "/" + rel.getAttribute("Target").lstrip("/")
    return default


# minidom, not ElementTree, edits these parts: it writes namespaces back as they were (ElementTree renames them ns0)
def _content_types(xml: bytes | None, project: str, main: str, main_type: str) -> bytes | None:
    """[Content_Types].xml with a content type for the ``project`` part and the macro-enabled ``main_type`` of the
    ``main`` part, or None when it already has both."""
    doc = minidom.parseString(xml) if xml else minidom.parseString(f'<Types xmlns="{CT_NS}"/>')
    root: Any = doc.documentElement  # parsed: never None
    overrides = {el.getAttribute("PartName").lower(): el for el in root.getElementsByTagNameNS(CT_NS, "Override")}
    defaults = {el.getAttribute("Extension").lower(): el for el in root.getElementsByTagNameNS(CT_NS, "Default")}
    changed = False
    wanted = ((project, PROJECT_CONTENT_TYPE), (main, main_type))
    for part, content_type in wanted:
        element = overrides.get(part.lower())
        if element is None and part.endswith(".bin") and "bin" in defaults \
                and defaults["bin"].getAttribute("ContentType") == content_type:
            continue  # a Default for .bin that says vbaProject covers the part
        if element is None:
            element = root.appendChild(_element(doc, "Override"))
            element.setAttribute("PartName", part)
        if element.getAttribute("ContentType") != content_type:
            element.setAttribute("ContentType", content_type)
            changed = True
    return ooxml.serialize(doc) if changed else None


def _relationships(xml: bytes | None, project: str) -> bytes | None:
    """The main part's rels with a vbaProject relationship to vbaProject.bin (``project``), or None if they have one."""
    doc = minidom.parseString(xml) if xml else minidom.parseString(f'<Relationships xmlns="{REL_NS}"/>')
    root: Any = doc.documentElement  # parsed: never None
    rels = root.getElementsByTagNameNS(REL_NS, "Relationship")
    for rel in rels:
        if rel.getAttribute("Type") == VBA_RELATIONSHIP:
            if rel.getAttribute("Target") in ("vbaProject.bin", "/" + project):
                return None
            rel.setAttribute("Target", "vbaProject.bin")
            return ooxml.serialize(doc)
    ids = {rel.getAttribute("Id") for rel in rels}
    number = next(n for n in range(1, len(ids) + 2) if f"rId{n}" not in ids)
    rel = root.appendChild(_element(doc, "Relationship"))
    rel.setAttribute("Id", f"rId{number}")
    rel.setAttribute("Type", VBA_RELATIONSHIP)
    rel.setAttribute("Target", "vbaProject.bin")
    return ooxml.serialize(doc)


def _element(doc: minidom.Document, name: str) -> minidom.Element:
    """A new element in the root's namespace, with the root's prefix if it has one (minidom declares nothing)."""
    root: Any = doc.documentElement
    return doc.createElementNS(root.namespaceURI, f"{root.prefix}:{name}" if root.prefix else name)

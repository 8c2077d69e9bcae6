"""The source's own VBA project of a .doc or .xls, carried into the .docm/.xlsm as Word and Excel do.

LibreOffice writes a .docm's or .xlsm's project again from its Basic library: a class module gains
``Option ClassModule`` (not VBA), a UserForm loses its designer storage and so its controls, a project whose modules
hold only attributes is dropped. Word and Excel instead copy the legacy file's project storage (Word's ``Macros``,
Excel's ``_VBA_PROJECT_CUR``) as the result's vbaProject.bin: a compound file whose root holds that storage's
children. ``carry`` makes that file (``cfb.write``), ``convert`` puts it in with ``vba.insert_project``; ``of_source``
and ``of_result`` read both sides' storages for the fidelity report. A digital signature of the project or the file
cannot survive a new container: it is left out, and ``Storage.signed`` says there was one.

A .docm, .xlsm or .pptm sent under a legacy name (SPEC accepts OOXML so named) keeps its project as a
vbaProject.bin part already: ``package_project`` takes it as it is, ``of_source`` reads it, and LibreOffice's rewrite
gives way to it as it does to a legacy file's.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import olefile

from docshift.engine import cfb
from docshift.formats import FORMATS

PROJECT_STORAGE = {"doc": "Macros", "xls": "_VBA_PROJECT_CUR"}
# signature streams of a VBA project ([MS-OSHARED] 2.3.2), in its storage or beside it; the file's own signature
SIGNATURE_STREAMS = frozenset({"\x05digitalsignature", "\x05digitalsignatureex", "\x05digitalsignatureagile"})
SIGNATURE_STORAGES = frozenset({"_xmlsignatures", "_signatures"})
MAX_PROJECT_SIZE = 64 << 20  # VBA projects are kilobytes; more is a damaged or hostile file (as vba.MAX_PROJECT_SIZE)


@dataclass(frozen=True)
class Storage:
    """A VBA project storage: {path below it: bytes} of its streams, {path: CLSID} of its storages, whether the
    project or file was signed; ``error`` says why it could not be read (then the rest is empty)."""
    streams: dict[str, bytes] = field(default_factory=dict)
    storages: dict[str, bytes] = field(default_factory=dict)
    signed: bool = False
    error: str | None = None


def is_project(data: bytes) -> bool:
    """Is ``data`` a compound file laid out as vbaProject.bin: ``PROJECT`` and a ``VBA`` storage with ``dir``?"""
    # olefile takes bytes shorter than a minimal compound file for a file name: check the size and magic here
    if len(data) < olefile.MINIMAL_OLEFILE_SIZE or not data.startswith(olefile.MAGIC):
        return False
    with olefile.OleFileIO(data) as ole:
        return (ole.get_type("PROJECT") == olefile.STGTY_STREAM and ole.get_type("VBA") == olefile.STGTY_STORAGE
                and ole.get_type("VBA/dir") == olefile.STGTY_STREAM)


def _project_part(package: zipfile.ZipFile, kind: str | None = None) -> zipfile.ZipInfo | None:
    """The package's vbaProject.bin: of ``kind``'s main part (``word/``, ``xl/``, ``ppt/``: where Office writes it),
    or without ``kind`` the first anywhere."""
    name = f"{FORMATS[kind].main_part.split('/')[0]}/vbaproject.bin" if kind else None
    return next((info for info in package.infolist() if (info.filename.lower() == name if name else
                                                         info.filename.lower().endswith("/vbaproject.bin"))), None)


def _package(path: str | Path) -> bool:
    """Is ``path`` an OOXML package: a zip, and no compound file (whose end may hold an embedded package's, which
    looks like a zip's end to zipfile)?"""
    try:
        return not olefile.isOleFile(str(path)) and zipfile.is_zipfile(path)
    except OSError:
        return False


def package_project(path: str | Path, kind: str) -> bytes | None:
    """The vbaProject.bin of the OOXML package ``path`` sent as ``kind`` (a .docm named .doc), as Office wrote it; None
    for a file that is no package, has no project beside its main part, or one larger than any project or not a VBA
    project. Its signature is a part of its own, left behind. Never raises."""
    try:
        if not _package(path):
            return None
        with zipfile.ZipFile(path) as package:
            info = _project_part(package, kind)
            if info is None or info.file_size > MAX_PROJECT_SIZE:
                return None
            data = package.read(info)
        return data if is_project(data) else None
    except Exception:  # a damaged package or project: LibreOffice's rewrite is all there is, and the report says so
        return None


def _read(path: str | Path, kind: str) -> tuple[cfb.Entry, bool] | None:
    """(project storage without its signature streams, was anything signed) of the legacy file, or None without
    one. Raises ValueError and olefile's errors for a storage that cannot be read."""
    name = PROJECT_STORAGE.get(kind)
    if name is None or not olefile.isOleFile(str(path)):
        return None
    with cfb.CompoundFile(path) as ole:
        if ole.get_type(f"{name}/VBA") != olefile.STGTY_STORAGE:
            return None
        root = {kid.name.lower() for kid in ole.root.kids}
        project = cfb.read_storage(ole, name, MAX_PROJECT_SIZE)
    signed = bool(root & (SIGNATURE_STREAMS | SIGNATURE_STORAGES))
    kept = [kid for kid in project.children if kid.data is None or kid.name.lower() not in SIGNATURE_STREAMS]
    signed = signed or len(kept) != len(project.children)
    project.children = kept
    return project, signed


def carry(path: str | Path, kind: str) -> bytes | None:
    """The vbaProject.bin made of the project storage of the legacy ``kind`` ("doc" or "xls") file ``path``, its
    signature left out, or None when it has none or it cannot be read or written. Never raises."""
    try:
        found = _read(path, kind)
        if found is None:
            return None
        data = cfb.write(found[0])
        return data if is_project(data) else None  # what vba.insert_project will ask of it
    except Exception:  # a damaged storage: LibreOffice's rewrite is all there is, and the report says so
        return None


def of_source(path: str | Path, kind: str) -> Storage | None:
    """The project storage of the legacy file, as ``carry`` would copy it (of an OOXML package's, its vbaProject.bin's
    root); None when it has none. Never raises."""
    if _package(path):
        return of_result(path, kind)
    try:
        found = _read(path, kind)
    except Exception as error:
        return Storage(error=str(error) or type(error).__name__)
    if found is None:
        return None
    project, signed = found
    return Storage(project.streams(), project.storages(), signed)


def of_result(path: str | Path, kind: str | None = None) -> Storage | None:
    """The root storage of the vbaProject.bin of the OOXML package ``path`` (beside ``kind``'s main part); None
    without one. Whether the package holds its project's signature (vbaProjectSignature*.bin) or its own
    (``_xmlsignatures``). Never raises."""
    try:
        with zipfile.ZipFile(path) as package:
            info = _project_part(package, kind)
            if info is None:
                return None
            if info.file_size > MAX_PROJECT_SIZE:
                return Storage(error="larger than any VBA project")
            data = package.read(info)
            signed = any("vbaprojectsignature" in name.lower() or name.lower().startswith("_xmlsignatures/")
                         for name in package.namelist())
        with olefile.OleFileIO(data) as ole:
            root = cfb.read_storage(ole, "", MAX_PROJECT_SIZE)
    except Exception as error:
        return Storage(error=str(error) or type(error).__name__)
    return Storage(root.streams(), root.storages(), signed)

"""A package written again with the members it keeps copied as they are stored: their compressed bytes, not
inflated and deflated again.

``zipfile`` has no public way to copy a member's stored bytes, and each mend that writes a result again
(``ooxml.rewrite``) inflated and deflated every part it kept: a quarter of the mends' time over the service bench's
files, and 205 of the 489 ms that a 271-part deck's master styles took to write. This writes the ZIP records itself
(PKWARE's APPNOTE 4.3.7, 4.3.12, 4.3.16: each member's local header and data, the central directory, its end), and
only where they are plain: under 65,535 members, every size and offset under 4 GiB (no ZIP64), nothing encrypted,
each member stored or deflated. Anything else is left to ``zipfile`` (``write`` answers False before it writes).
"""

import struct
import time
import zipfile
import zlib
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import BinaryIO

from docshift.errors import ResultUnreadable as Unreadable

LIMIT = 0xFFFFFFFF  # past this a size or offset needs ZIP64
MEMBERS = 0xFFFF
VERSION = 20  # 2.0: deflated, folders
UTF8 = 0x800  # general purpose bit 11: the name is UTF-8
LOCAL, CENTRAL, END = b"PK\x03\x04", b"PK\x01\x02", b"PK\x05\x06"
HEADER, CENTRAL_HEADER, END_RECORD = 30, 46, 22  # the fixed parts of a local and a central header, the end record
KINDS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
PERMISSIONS = 0o600 << 16  # rw-------, as zipfile gives a member that has none


def write(src: zipfile.ZipFile, path: Path, out: BinaryIO, edits: Mapping[str, bytes], added: Mapping[str, bytes],
          dropped: Collection[str]) -> bool:
    """The package ``src`` (stored at ``path``) written into ``out`` (empty, at its start): ``edits`` in place of
    the parts they name (each as its part was compressed), ``added`` ones (deflated) after the rest, ``dropped`` ones
    left out, every other part's stored bytes copied. False, with nothing written, where it is not plain."""
    kept = [info for info in src.infolist() if info.filename not in dropped]
    if len(kept) + len(added) >= MEMBERS or any(
            info.flag_bits & 1 or info.compress_type not in KINDS or info.header_offset >= LIMIT
            or not 1980 <= info.date_time[0] <= 2107 for info in kept):
        return False
    # the largest the package could be: each kept part as it is stored, each new one deflated at its worst (5 bytes
    # more a 16 KB block), the two headers of each, and the directory's end
    news = [*(edits[info.filename] for info in kept if info.filename in edits), *added.values()]
    largest = sum(info.compress_size for info in kept if info.filename not in edits) + \
        sum(len(data) + len(data) // 16384 * 5 + 16 for data in news) + \
        sum(HEADER + CENTRAL_HEADER + 2 * len(name.encode()) for name in [*(info.filename for info in kept), *added]) \
        + END_RECORD
    if largest >= LIMIT:
        return False
    now = time.localtime(time.time())[:6]
    central = []
    with open(path, "rb") as stored:
        for info in kept:
            if info.filename in edits:
                crc, size, data = _compressed(edits[info.filename], info.compress_type)
            else:
                crc, size, data = info.CRC, info.file_size, _stored(stored, info)
            central.append(_member(out, info.filename, info.date_time, info.compress_type, crc, size, data,
                                   info.create_system, info.external_attr or PERMISSIONS))
        for name, new in added.items():
            crc, size, data = _compressed(new, zipfile.ZIP_DEFLATED)
            central.append(_member(out, name, now, zipfile.ZIP_DEFLATED, crc, size, data,
                                   zipfile.ZipInfo().create_system, PERMISSIONS))
    start = out.tell()
    out.write(b"".join(central))
    out.write(struct.pack("<4s4H2LH", END, 0, 0, len(central), len(central), out.tell() - start, start, 0))
    return True


def _compressed(data: bytes, kind: int) -> tuple[int, int, bytes]:
    """(CRC-32, size, the bytes stored) of ``data`` stored or deflated as ``zipfile`` deflates."""
    if kind == zipfile.ZIP_STORED:
        return zlib.crc32(data), len(data), data
    deflate = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -15)
    return zlib.crc32(data), len(data), deflate.compress(data) + deflate.flush()


def _stored(package: BinaryIO, info: zipfile.ZipInfo) -> bytes:
    """The compressed bytes of member ``info``, past its local header."""
    package.seek(info.header_offset)
    header = package.read(HEADER)
    if len(header) != HEADER or header[:4] != LOCAL:
        raise Unreadable(f"{info.filename}: no local header where the central directory puts it")
    name, extra = struct.unpack_from("<HH", header, 26)
    package.seek(info.header_offset + HEADER + name + extra)
    data = package.read(info.compress_size)
    if len(data) != info.compress_size:
        raise Unreadable(f"{info.filename} ends before its size")
    return data


def _member(out: BinaryIO, name: str, date_time: tuple[int, ...], kind: int, crc: int, size: int, data: bytes,
            system: int, attributes: int) -> bytes:
    """Write a member's local header and data into ``out``; its central directory header."""
    encoded, flags = (name.encode("ascii"), 0) if name.isascii() else (name.encode("utf-8"), UTF8)
    year, month, day, hour, minute, second = date_time
    dos_time, dos_date = hour << 11 | minute << 5 | second // 2, (year - 1980) << 9 | month << 5 | day
    offset = out.tell()
    common = struct.pack("<4H3L", flags, kind, dos_time, dos_date, crc, len(data), size)
    out.write(LOCAL + struct.pack("<H", VERSION) + common + struct.pack("<2H", len(encoded), 0) + encoded)
    out.write(data)
    return CENTRAL + struct.pack("<2H", system << 8 | VERSION, VERSION) + common + struct.pack(
        "<5H2L", len(encoded), 0, 0, 0, 0, attributes, offset) + encoded

"""A BLIP of an Office drawing ([MS-ODRAW] 2.2.23) as a picture file an OOXML package holds as its own part.

The BStore of an .xls keeps each picture as a BLIP record: a metafile (EMF, WMF, PICT) after a header that says
its size and whether it is deflated, a bitmap (JPEG, PNG, DIB, TIFF) after a tag byte. A picture file differs from
what the record holds in two cases: a WMF lost its placeable header ([MS-WMF] 2.3.2.3 META_PLACEABLE), made again
here from the header's bounds and size, and a DIB lacks the BITMAPFILEHEADER that makes it a .bmp.
"""

import struct
import zlib
from dataclasses import dataclass

# BLIP record type: (extension, content type, metafile)
BLIPS = {0xF01A: ("emf", "image/x-emf", True), 0xF01B: ("wmf", "image/x-wmf", True),
         0xF01D: ("jpeg", "image/jpeg", False), 0xF01E: ("png", "image/png", False),
         0xF01F: ("bmp", "image/bmp", False), 0xF029: ("tiff", "image/tiff", False),
         0xF02A: ("jpeg", "image/jpeg", False)}
# the odd instance of each type carries a second 16-byte uid ([MS-ODRAW] 2.2.24-2.2.31)
WMF, DIB = 0xF01B, 0xF01F
APM_KEY = 0x9AC6CDD7
EMU_PER_INCH = 914400


@dataclass
class Picture:
    extension: str
    content_type: str
    data: bytes


def picture(record: bytes | bytearray, blip: int, instance: int, body: int, stop: int, limit: int) -> Picture | None:
    """The picture file of the BLIP of type ``blip`` whose body is ``record[body:stop]``, or None when it is of a
    type OOXML does not hold (PICT), its header does not read, or it would be over ``limit`` bytes."""
    if blip not in BLIPS:
        return None
    extension, content_type, metafile = BLIPS[blip]
    pos = body + 16 * (2 if instance & 1 else 1)
    if metafile:
        if pos + 34 > stop:
            return None
        size, left, top, right, bottom, width, height = struct.unpack_from("<I4i2i", record, pos)
        raw = bytes(record[pos + 34:stop])
        if size > limit:
            return None
        try:
            data = zlib.decompressobj().decompress(raw, size) if record[pos + 32] == 0 else raw
        except zlib.error:
            return None
        if blip == WMF and data[:4] != struct.pack("<I", APM_KEY):
            data = placeable((left, top, right, bottom), (width, height)) + data
    else:
        data = bytes(record[pos + 1:stop])  # after the tag byte
        if blip == DIB:
            data = bitmap_file(data)
    return Picture(extension, content_type, data) if data else None


def placeable(bounds: tuple[int, int, int, int], size: tuple[int, int]) -> bytes:
    """A WMF's placeable header: the bounding box from the BLIP's ``bounds``, units per inch so that it measures
    ``size`` (EMUs) as the BLIP says."""
    left, top, right, bottom = (max(-32768, min(32767, value)) for value in bounds)
    inch = 1440  # twips, when the size says nothing
    if right > left and size[0] > 0:
        inch = max(1, min(65535, round((right - left) * EMU_PER_INCH / size[0])))
    words = struct.pack("<IH4hHI", APM_KEY, 0, left, top, right, bottom, inch, 0)
    checksum = 0
    for (word,) in struct.iter_unpack("<H", words):
        checksum ^= word
    return words + struct.pack("<H", checksum)


def bitmap_file(dib: bytes) -> bytes:
    """A .bmp of a DIB: the file header in front, pointing past the info header and its colour table."""
    if len(dib) < 16:
        return b""
    header_size, = struct.unpack_from("<I", dib, 0)
    if header_size == 12:  # BITMAPCOREHEADER: three bytes a colour, the whole table for up to 8 bits
        bits, = struct.unpack_from("<H", dib, 10)
        table = 3 * (1 << bits) if bits <= 8 else 0
    elif header_size >= 40 and len(dib) >= 40:
        bits, compression = struct.unpack_from("<HI", dib, 14)
        used, = struct.unpack_from("<I", dib, 32)
        table = 4 * (used or (1 << bits if bits <= 8 else 0))
        if header_size == 40 and compression in (3, 6):  # BI_BITFIELDS, BI_ALPHABITFIELDS: the masks follow
            table += 12 if compression == 3 else 16
    else:
        return b""
    return struct.pack("<2sIHHI", b"BM", 14 + len(dib), 0, 0, 14 + header_size + table) + dib


def blank_png() -> Picture:
    """A white pixel: the replacement image of an object whose own is of a type OOXML does not hold. The object
    is kept whole; Office draws it anew when it is opened."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(b"\x00\xff\xff\xff")) + chunk(b"IEND", b""))
    return Picture("png", "image/png", png)

"""Is this upload really a legacy Office file of the type its name says?

Every accepted type is an OLE2 compound file holding the type's main stream.
Password-protected files are told apart so they fail ``encrypted_document``
instead of reaching LibreOffice (which would wait for a password).
"""

import olefile
from msoffcrypto import OfficeFile

from docshift.errors import ConversionFailed
from docshift.formats import FORMATS

# Word 97+ and Word 6/95 keep "WordDocument"; BIFF8 "Workbook", BIFF5/7 "Book";
# PowerPoint 97+ "PowerPoint Document", PowerPoint 4.0 "PP40"
STREAMS = {"doc": ["WordDocument"], "xls": ["Workbook", "Book"], "ppt": ["PowerPoint Document", "PP40"]}


def check(path, kind):
    """Raise ConversionFailed unless ``path`` is a readable, unencrypted file of ``kind``."""
    if not olefile.isOleFile(str(path)):
        raise ConversionFailed("unsupported_content", f"The file is not a legacy {FORMATS[kind].name} file.")
    try:
        with olefile.OleFileIO(str(path)) as ole:
            streams = {"/".join(entry) for entry in ole.listdir()}
    except Exception as error:  # olefile raises many kinds on damaged files
        raise ConversionFailed("unsupported_content", "The file is damaged and cannot be read.") from error
    if "EncryptionInfo" in streams and "EncryptedPackage" in streams:
        raise ConversionFailed("encrypted_document", "The file is password-protected.")
    if not any(name in streams for name in STREAMS[kind]):
        raise ConversionFailed("unsupported_content", f"The file is not a legacy {FORMATS[kind].name} file.")
    if _encrypted(path):
        raise ConversionFailed("encrypted_document", "The file is password-protected.")


def _encrypted(path):
    try:
        with open(path, "rb") as f:
            return OfficeFile(f).is_encrypted()
    except Exception:
        # msoffcrypto does not know every variant; LibreOffice gets to try
        return False

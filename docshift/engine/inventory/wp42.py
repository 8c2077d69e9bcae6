"""The text of a file LibreOffice took for a WordPerfect 4.2 document, counted from its bytes.

WordPerfect 4.2 wrote no header, so LibreOffice's import (libwpd) recognises one by its bytes alone: text in which a
byte of 0x80-0xBF is a one-byte formatting code (0x81 right justification on, 0x94 underline on) and one of
0xC0-0xFE opens a group of codes. A DOS text file in code page 437 or 850 whose letters beyond ASCII all fall in
0x80-0xBF (German without "ß": ü is 0x81, ä 0x84, ö 0x94) passes for one, where the same text with a "ß" (0xE1) is
recognised as text and refused. Its import then drops those letters as the codes they would be: "für" becomes "fr".

A code sits between words (bold on before one, off after it), a DOS letter inside one. So the text counted is the
file's ASCII characters, and one character beyond ASCII (``FOLDED``: which one depends on the code page) for each
byte of 0x80-0xBF that is a letter of code page 437 or 850 and has an ASCII letter on both sides. A file with a
group of codes (a byte of 0xC0 and above), a WordPerfect 5 or later header, or control bytes other than tab, line
and page ends is left unknown.
"""

import re
from pathlib import Path

from docshift.engine.inventory.common import FOLDED, Inventory, characters

HEADER = b"\xffWPC"  # WordPerfect 5.0 and later: a real header, no guess
# the letters of code pages 437 and 850 among 0x80-0xBF (ü, é, ä, ø, Ø, á, ñ, Á, ...): not their symbols, nor the
# bytes that are a hyphen of WordPerfect 4.2's (0xA9-0xAC), which sits inside a word too
LETTERS = rb"\x80-\x9b\x9d\xa0-\xa5\xb5-\xb7"
INNER = re.compile(rb"(?<=[A-Za-z])[" + LETTERS + rb"](?=[A-Za-z])")
NOT_TEXT = re.compile(rb"[\x00-\x08\x0b\x0e-\x19\x1b-\x1f\xc0-\xff]")
WORD = re.compile(rb"[A-Za-z\x80-\xbf]*[\x80-\xbf][A-Za-z\x80-\xbf]*")
SHOWN = 3  # words named in the report


def read(path: str | Path, inventory: Inventory) -> None:
    """Count the text of ``path`` into ``inventory`` (its ``characters``, and where letters beyond ASCII are), where
    it is 8-bit text that only the WordPerfect 4.2 guess took for a document."""
    data = Path(path).read_bytes()
    if data.startswith(HEADER) or NOT_TEXT.search(data):
        return
    text = characters(data.translate(None, bytes(range(0x80, 0x100))).decode("ascii"))
    inner = len(INNER.findall(data))
    if inner:
        text[FOLDED] = inner
        words = [word.decode("cp850") for word in WORD.findall(data) if INNER.search(word)]
        shown = ", ".join(repr(word) for word in list(dict.fromkeys(words))[:SHOWN])
        inventory.where["characters"] = [
            "letters of a DOS code page, which LibreOffice's WordPerfect 4.2 import (it read this file, which has no "
            f"header, as one) takes for formatting codes, as in {shown}"]
    inventory.text = text
    inventory.counts["characters"] = text.total()

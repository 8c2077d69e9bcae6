"""A presentation's comments written as XML that readers accept.

LibreOffice 25.2's PPTX export writes the text of a comment into its ``p:text`` as the text is, without escaping it:
a comment that says "R&D" or "<draft>" makes its comments part XML that is not well-formed, so that PowerPoint has
to repair the file and XML readers refuse it (one LibreOffice test deck of the sets read here, whose comment holds
"&" and "$?>"; a plain ``soffice --convert-to`` writes the same). Each ``p:text`` of the result's comments parts
whose content cannot be escaped XML (a "<", an "&" that starts no reference, a character XML does not allow) is
written again, escaped; a vertical tab, PowerPoint's line break inside a paragraph, becomes a line feed. A part
that is still not well-formed after that is left as it was, and the report names its comments as unreadable.
"""

import re
import zipfile
from pathlib import Path
from xml.sax.saxutils import escape

from docshift.engine import ooxml
from docshift.engine.embedding import MAX_EDITED_PART

COMMENTS = re.compile(r"ppt/comments/[^/]+\.xml")
TEXT = re.compile(rb"(<p:text>)(.*?)(</p:text>)", re.DOTALL)
# what escaped text holds: a reference (named, decimal or hexadecimal) after each "&", no "<"
ESCAPED = re.compile(r"(?:[^&<]|&(?:amp|lt|gt|quot|apos|#[0-9]+|#x[0-9a-fA-F]+);)*")
# characters XML 1.0 does not allow in a document
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def mend(result: Path, kind: str) -> int:
    """How many comments parts of the .pptx ``result`` were written again, escaped (0: the file is untouched)."""
    if kind != "ppt":
        return 0
    with zipfile.ZipFile(result) as package:
        edits = {}
        for info in package.infolist():
            if not COMMENTS.fullmatch(info.filename) or info.file_size > MAX_EDITED_PART:
                continue
            data = ooxml.read(package, info, MAX_EDITED_PART)
            fixed = TEXT.sub(_escaped, data)
            if fixed != data and _well_formed(fixed, info.filename):
                edits[info.filename] = fixed
        if edits:
            ooxml.rewrite(package, result, edits)
    return len(edits)


def _escaped(match: re.Match[bytes]) -> bytes:
    """A ``p:text`` element whose content is escaped, if it was written as the text is."""
    text = match.group(2).decode("utf-8", "replace")
    if ESCAPED.fullmatch(text) and not NOT_XML.search(text):
        return match.group(0)
    text = NOT_XML.sub(lambda character: "\n" if character.group() == "\x0b" else "", text)
    return match.group(1) + escape(text).encode() + match.group(3)


def _well_formed(data: bytes, name: str) -> bool:
    try:
        ooxml.stream((data,), name)
    except ooxml.Unreadable:
        return False
    return True

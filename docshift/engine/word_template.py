"""The template a .doc is attached to, put back into the .docx.

Word keeps the path of a document's template (``C:\\Program Files\\Defensie\\Templates\\Letter.dot``,
``\\\\file1\\sharedfiles\\temp\\four-images.dot``) in the second string of the table stream's SttbfAssoc
(ibstAssocDot). That template gives the document its macros, AutoText and building blocks, and its styles where
"automatically update document styles" is on; Word shows it under Developer > Document Template. LibreOffice's
import keeps its bare file name as a property only: each of the 13 of 253 .doc files of the corpus and LibreOffice's
tests that name a template came out attached to none.

``mend`` writes ``w:attachedTemplate`` into the result's settings part, before the first of its children that
CT_Settings puts after it, and the external relationship it names, whose target is the path as Word writes one: a
``file:///`` URI of an absolute path, the name itself where the .doc gives no folder, spaces and other characters a
URI does not hold escaped. A result that names a template already is left as it is.
"""

import zipfile
from pathlib import Path
from urllib.parse import quote

from docshift.engine import sheet_objects
from docshift.engine.cfb import CompoundFile
from docshift.engine.embedding import child_place, guarded, part_bytes
from docshift.engine.inventory.common import stream
from docshift.engine.inventory.doc import _fib
from docshift.engine.inventory.doc_bullets import strings
from docshift.engine.inventory.package import NS_W, SEP, Package
from docshift.engine.word_schema import SETTINGS as SETTINGS_ORDER

PAIR_STTBF_ASSOC, ASSOC_DOT = 32, 1  # FibRgFcLcb97's fcSttbfAssoc; SttbfAssoc's ibstAssocDot
RELATIONSHIPS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
SETTINGS, ATTACHED = f"{RELATIONSHIPS}/settings", f"{RELATIONSHIPS}/attachedTemplate"
ATTACHED_TEMPLATE = f"{NS_W}{SEP}attachedTemplate"
# the children of CT_Settings before attachedTemplate, in the schema's order
PRECEDING = frozenset(f"{NS_W}{SEP}{local}" for local in SETTINGS_ORDER[:SETTINGS_ORDER.index("attachedTemplate")])


def mend(result: Path, source: Path, kind: str) -> int:
    """Attach ``result`` (LibreOffice's export of the .doc ``source``) to the template the .doc names. Returns 1
    where it did, else 0 (the file is untouched). Never raises for what the files hold."""
    if kind != "doc":
        return 0
    return guarded(_attach, result, source, "the template of %s stays unnamed: %r")


def _attach(result: Path, source: Path) -> int:
    template = template_of(source)
    if not template:
        return 0
    with zipfile.ZipFile(result) as zf:
        package = Package(zf)
        settings = settings_part(package)
        if settings is None:
            return 0
        data = part_bytes(package, settings)
        present, at, _ = child_place(data, settings, ATTACHED_TEMPLATE, (), PRECEDING)
        if present:
            return 0
        rels_part, rels = sheet_objects.rels_of(package, settings)
        rid = sheet_objects.relationship_ids(rels)()
        edits: dict[str, bytes] = {settings: data[:at] + f'<w:attachedTemplate xmlns:w="{NS_W}" xmlns:r='
                                                         f'"{RELATIONSHIPS}" r:id="{rid}"/>'.encode() + data[at:]}
        added: dict[str, tuple[bytes, str]] = {}
        sheet_objects.add_relationships(package, rels_part, rels, [(rid, ATTACHED, sheet_objects.escape(
            target(template)), "External")], edits, added)
        sheet_objects.write(zf, package, result, edits, added)
    return 1


def settings_part(package: Package) -> str | None:
    """The name of the document's settings part (None where it has none)."""
    return next((target for rel_type, target in package.relationships("word/document.xml").values()
                 if rel_type == SETTINGS and target in package.names), None)


def template_of(source: Path) -> str:
    """The path of the template the .doc ``source`` is attached to, as Word keeps it; "" where it names none."""
    with CompoundFile(source) as ole:
        word = stream(ole, "WordDocument")
        if word is None:
            return ""
        doc = _fib(word, lambda name: stream(ole, name))
    found = strings(doc.table, doc.pair, PAIR_STTBF_ASSOC)
    return found[ASSOC_DOT].strip("\0") if len(found) > ASSOC_DOT else ""


def target(path: str) -> str:
    """The relationship target Word writes for the template ``path``: a ``file:///`` URI of a drive's or a share's
    path (its backslashes kept), the name alone where it has no folder."""
    escaped = quote(path, safe="\\/:!$'()*+,;=@~-._")
    absolute = (len(path) > 2 and path[1] == ":" and path[0].isalpha()) or path.startswith("\\\\")
    return f"file:///{escaped}" if absolute else escaped

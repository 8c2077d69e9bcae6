"""Each result's XML against the OOXML schemas, beside a plain ``soffice --convert-to`` of the same file: the check
that finds what Word's own reader may refuse, and anything a mend writes where the schema has no place for it.

The schemas are ISO/IEC 29500's transitional ones (WordprocessingML, SpreadsheetML, PresentationML, DrawingML,
VML, the shared types) as python-docx keeps them in its source (``ref/xsd``). They are fetched once, with
``apt-get source`` of Debian's python-docx through a private apt state whose sources are the system's own as
``deb-src``, into ``.cache/ooxml-schemas`` (or ``--schemas``).

Each file goes through a cold ``soffice`` (``reference.Cold``) and through the worker's engine, as in
``bench/parts.py``. Before a part is validated it is read as a consumer of Markup Compatibility reads it: an
``mc:AlternateContent`` is its ``mc:Fallback``, and an element or attribute of a namespace the schemas do not
define (Office 2010's ``w14``, LibreOffice's ``loext``, ...) is left out. libxml2 stops at an element's first
error, so the element it names is taken out and the part validated again, until no new error shows (at most
``ROUNDS`` times). An error is counted by the part's kind, the element's path without indices, and its message
with the values masked.

Three kinds are Office's own reading of the schemas rather than faults, and Excel and PowerPoint write them too:
``xml:space`` on a spreadsheet's ``t``, ``dateCompatibility`` on ``workbookPr``, and a bullet's size
(``a:buSzPct``) as a number rather than a percentage. They are counted apart.

It prints, for each kind of file, how many results of each side hold an error, the errors of the plain results by
kind, each error docshift's result holds that the plain one of the same file does not (a mend's fault, or a
masked error that docshift's mends unmasked), and each the plain one holds that docshift's does not.

    .venv/bin/python bench/schema.py [FOLDER ...]      # default ../shared/corpus/doc, xls and ppt
"""

import argparse
import re
import subprocess
import tarfile
import tempfile
import zipfile
from collections import Counter, defaultdict
from pathlib import Path

import reference
from lxml import etree

HERE = Path(__file__).resolve().parent
CACHE = HERE.parent / ".cache" / "ooxml-schemas"
MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
XML = "http://www.w3.org/XML/1998/namespace"
TIMEOUT = 60
ROUNDS = 40
# the attributes of the xml namespace the schemas use (the W3C's xml.xsd, as much of it as they need)
XML_SCHEMA = f"""<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema" targetNamespace="{XML}">
<xs:attribute name="lang" type="xs:string"/><xs:attribute name="base" type="xs:anyURI"/>
<xs:attribute name="id" type="xs:ID"/><xs:attribute name="space"><xs:simpleType><xs:restriction base="xs:NCName">
<xs:enumeration value="default"/><xs:enumeration value="preserve"/></xs:restriction></xs:simpleType></xs:attribute>
</xs:schema>"""
VALUE = re.compile(r"'[^']*'(?= is not| is less| is greater)|(?<=The value )'[^']*'")
INDEX = re.compile(r"\[\d+\]")
NAMESPACE = re.compile(r"\{([^}]+)\}")
UNEXPECTED = "This element is not expected"
# the prefixes of messages where a part names a namespace without one (a default namespace)
PREFIXES = {XML: "xml", "http://schemas.openxmlformats.org/spreadsheetml/2006/main": "x",
            "http://schemas.openxmlformats.org/wordprocessingml/2006/main": "w",
            "http://schemas.openxmlformats.org/presentationml/2006/main": "p",
            "http://schemas.openxmlformats.org/drawingml/2006/main": "a"}
# Office's own reading of the schemas, which Excel and PowerPoint write too: counted apart, not as errors
OFFICE = re.compile(r"Element '\w+:t', attribute 'xml:space'|attribute 'dateCompatibility'"
                    r"|Element 'a:buSzPct', attribute 'val': \[facet 'pattern'\]")


def fetch(folder):
    """The transitional schemas of python-docx's source (its ``ref/xsd``, there since 1.0) unpacked into ``folder``:
    ``apt-get source`` of Debian's unstable python-docx from the archive the system's apt sources name."""
    work = Path(tempfile.mkdtemp(prefix="schemas-"))
    blocks = [block for path in Path("/etc/apt/sources.list.d").glob("*.sources")
              for block in path.read_text().split("\n\n") if re.search(r"(?m)^Types:.*\bdeb\b", block)]
    if not blocks:
        raise SystemExit(f"no apt sources to fetch the schemas from: put the .xsd files of python-docx's ref/xsd "
                         f"into {folder}")
    source = re.sub(r"(?m)^Types:.*$", "Types: deb-src", min(blocks, key=lambda block: "security" in block))
    (work / "parts").mkdir()
    (work / "parts" / "src.sources").write_text(re.sub(r"(?m)^Suites:.*$", "Suites: unstable", source) + "\n")
    (work / "lists" / "partial").mkdir(parents=True)
    apt = ["apt-get", "-q", "-o", "Dir::Etc::SourceList=/dev/null", "-o", f"Dir::Etc::SourceParts={work / 'parts'}",
           "-o", f"Dir::State::Lists={work / 'lists'}", "-o", f"Dir::Cache={work / 'cache'}", "-o",
           "APT::Sandbox::User=root"]
    subprocess.run([*apt, "update"], check=True, capture_output=True)
    # the upstream tarball is all this needs: a mirror missing the Debian files fails the command, not the fetch
    subprocess.run([*apt, "source", "--download-only", "python-docx/unstable"], capture_output=True, cwd=work)
    original = next(work.glob("python-docx_*.orig.tar.*"), None)
    if original is None:
        raise SystemExit(f"python-docx's source could not be fetched: put the .xsd files of its ref/xsd into {folder}")
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(original) as archive:
        for member in archive.getmembers():
            if re.search(r"/ref/xsd/[^/]+\.xsd$", member.name) and member.isfile():
                (folder / Path(member.name).name).write_bytes(archive.extractfile(member).read())
    (folder / "xml.xsd").write_text(XML_SCHEMA)


def load(folder):
    """(One schema of every namespace in ``folder``, the namespaces it defines)."""
    if not (folder / "wml.xsd").exists():
        fetch(folder)
    namespaces = {}
    for path in sorted(folder.glob("*.xsd")):
        target = etree.parse(str(path)).getroot().get("targetNamespace")
        if target and path.name != "all.xsd":
            namespaces.setdefault(target, path.name)
    imports = "".join(f'<xs:import namespace="{namespace}" schemaLocation="{name}"/>'
                      for namespace, name in sorted(namespaces.items(), key=lambda item: item[0] != XML))
    (folder / "all.xsd").write_text(f'<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema" '
                                    f'targetNamespace="urn:docshift:all">{imports}</xs:schema>')
    return etree.XMLSchema(etree.parse(str(folder / "all.xsd"))), set(namespaces)


def compatible(root, known):
    """``root`` read as Markup Compatibility's consumer reads it, knowing the namespaces ``known``."""
    for choice in list(root.iter(f"{{{MC}}}AlternateContent")):
        fallback = choice.find(f"{{{MC}}}Fallback")
        parent, at = choice.getparent(), choice.getparent().index(choice)
        for offset, child in enumerate(list(fallback) if fallback is not None else []):
            parent.insert(at + offset, child)
        parent.remove(choice)
    for element in list(root.iter(etree.Element)):
        if element.getparent() is not None and etree.QName(element).namespace not in known and \
                not any(etree.QName(above).localname == "ext" for above in element.iterancestors()):
            element.getparent().remove(element)
            continue
        for name in list(element.attrib):
            namespace = etree.QName(name).namespace
            if namespace and namespace != XML and namespace not in known:
                del element.attrib[name]
    return root


def errors(schema, known, data, name):
    """The errors of part ``name`` (``data``): {(part kind, path, message)}; none where the schemas do not define
    its root's namespace."""
    kind = re.sub(r"\d+(?=\.xml$)", "N", name)
    try:
        root = etree.fromstring(data, etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True))
    except etree.XMLSyntaxError:
        return {(kind, "", "not well-formed")}
    if etree.QName(root).namespace not in known:
        return set()
    root = compatible(root, known)
    found = set()
    if schema.validate(root):
        return found
    # the prefixes of the messages and of the paths, read only for a part that has errors (a sheet's cells are many)
    prefixes = {prefix: namespace for element in root.iter(etree.Element)
                for prefix, namespace in element.nsmap.items() if prefix}
    short = PREFIXES | {namespace: prefix for prefix, namespace in prefixes.items()}
    for _ in range(ROUNDS):
        new = False
        for entry in schema.error_log:
            message = NAMESPACE.sub(lambda uri: short.get(uri.group(1), uri.group(1)) + ":", entry.message)
            key = (kind, INDEX.sub("", entry.path or ""), VALUE.sub("<v>", message))
            new = new or key not in found
            found.add(key)
            # an element out of place goes, where the path names one (a part's default namespace makes its paths
            # "/*/*", which name many): the rest of its parent's content is checked next round; an element whose
            # own attribute or content erred stays, its error hiding none
            if UNEXPECTED not in entry.message or not entry.path or "*" in entry.path:
                continue
            try:
                nodes = root.getroottree().xpath(entry.path, namespaces=prefixes)
            except etree.XPathError:
                continue
            if len(nodes) == 1 and isinstance(nodes[0], etree._Element) and nodes[0].getparent() is not None:
                nodes[0].getparent().remove(nodes[0])
        if not new or schema.validate(root):
            break
    return found


def package_errors(schema, known, path):
    """The errors of every XML part of the package at ``path`` whose root the schemas define."""
    found = set()
    with zipfile.ZipFile(path) as package:
        for name in package.namelist():
            if not name.endswith(".xml") or name.startswith("[") or name.endswith(".rels"):
                continue
            found |= errors(schema, known, package.read(name), name)
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    corpus = HERE.parent.parent / "shared" / "corpus"
    parser.add_argument("folders", nargs="*", type=Path, default=[corpus / kind for kind in ("doc", "xls", "ppt")])
    parser.add_argument("--schemas", type=Path, default=CACHE, help="where the schemas are (fetched if missing)")
    args = parser.parse_args()
    schema, known = load(args.schemas)
    invalid, plain_kinds, added, removed, office = defaultdict(Counter), Counter(), Counter(), Counter(), Counter()
    files = reference.legacy_files(args.folders)
    for path, kind, plain_content, plain, ours, _ in reference.both(files, "schema", TIMEOUT):
        if plain_content is None or ours is None:
            invalid[kind]["not compared"] += 1
            continue
        theirs, mine = package_errors(schema, known, plain), package_errors(schema, known, ours)
        office.update({"plain": int(any(OFFICE.search(key[2]) for key in theirs)),
                       "docshift": int(any(OFFICE.search(key[2]) for key in mine))})
        theirs = {key for key in theirs if not OFFICE.search(key[2])}
        mine = {key for key in mine if not OFFICE.search(key[2])}
        invalid[kind].update({"compared": 1, "plain invalid": int(bool(theirs)), "docshift invalid": int(bool(mine))})
        plain_kinds.update(theirs)
        added.update(mine - theirs)
        removed.update(theirs - mine)
        for key in sorted(mine - theirs):
            print(f"{path.parent.name}/{path.name}: docshift only: {' | '.join(key)}", flush=True)
    for kind, tally in invalid.items():
        print(f"{kind}: {dict(tally)}")
    print(f"results holding Office's own reading of the schemas (xml:space, dateCompatibility, buSzPct): "
          f"{dict(office)}")
    for title, tally in (("errors of the plain results", plain_kinds), ("errors docshift's results add", added),
                         ("errors docshift's results no longer have", removed)):
        print(f"\n{title}, in how many files:")
        for key, count in tally.most_common():
            print(f"  {count:5}  {' | '.join(key)}"[:300])


if __name__ == "__main__":
    main()

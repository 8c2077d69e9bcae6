"""The counts of a .docx/.docm, the result of a .doc."""

from docshift.engine.inventory.common import Inventory
from docshift.engine.inventory.package import NS_W, SEP, Package, charts_and_objects, pictures_of, scan

W_TEXT = {f"{NS_W}{SEP}t", f"{NS_W}{SEP}delText"}


def read(package: Package, inventory: Inventory) -> None:
    """Counts of a .docx/.docm: the main document, headers and footers, notes and comments parts."""
    counts = inventory.counts
    try:
        charts, objects = charts_and_objects(package, "word")
        objects += charts  # a .doc has no charts of its own: a chart part was an MS Graph object
    except Exception:
        objects = None
    pictures: set[str] = set()
    headers, comments, math = 0, 0, 0
    main = "word/document.xml"
    try:
        part = scan(package, main, W_TEXT)
        inventory.text = part.text
        counts["characters"] = part.text.total()
        pictures |= pictures_of(package, main, part)
        math = part.math
        counts["embedded_objects"] = None if objects is None else objects + math
        others = package.matching(r"word/(header|footer)[0-9]*\.xml")
        for name in others:
            sub = scan(package, name, W_TEXT)
            headers += sub.content
            pictures |= pictures_of(package, name, sub)
        counts["headers_footers"] = headers
        for name in package.matching(r"word/(footnotes|endnotes|comments)\.xml"):
            sub = scan(package, name, (), count=(f"{NS_W}{SEP}comment",))
            comments += sub.elements[f"{NS_W}{SEP}comment"]
            pictures |= pictures_of(package, name, sub)
        counts["comments"] = comments
        counts["images"] = len(pictures)
    except Exception:
        pass

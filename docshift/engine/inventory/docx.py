"""The counts of a .docx/.docm, the result of a .doc."""

from docshift.engine.inventory.common import Inventory
from docshift.engine.inventory.package import (
    IMAGE_RELATIONSHIP,
    NS_O,
    NS_R,
    NS_V,
    NS_W,
    SEP,
    Package,
    Part,
    charts_and_objects,
    picture_references,
    scan,
)

W_TEXT = {f"{NS_W}{SEP}t", f"{NS_W}{SEP}delText"}
NUMBERING = "word/numbering.xml"


def read(package: Package, inventory: Inventory) -> None:
    """Counts of a .docx/.docm: the main document, headers and footers, notes and comments parts."""
    counts = inventory.counts
    try:
        charts, objects = charts_and_objects(package, "word")
        objects += charts  # a .doc has no charts of its own: a chart part was an MS Graph object
    except Exception:
        objects = None
    pictures: dict[tuple[str, str], str] = {}  # {(part, relationship id): media part}
    headers, comments, math = 0, 0, 0
    main = "word/document.xml"
    try:
        part = scan(package, main, W_TEXT)
        inventory.text, inventory.computed = part.text, part.computed
        counts["characters"] = part.text.total()
        pictures.update(_placed(package, main, part))
        math = part.math
        counts["embedded_objects"] = None if objects is None else objects + math
        others = package.matching(r"word/(header|footer)[0-9]*\.xml")
        shared: set[str] = set()  # LibreOffice writes one header in several parts (default, even, first page)
        for name in others:
            sub = scan(package, name, W_TEXT)
            headers += sub.content
            shared |= set(picture_references(package, name, sub).values())
        counts["headers_footers"] = headers
        for name in package.matching(r"word/(footnotes|endnotes|comments)\.xml"):
            sub = scan(package, name, (), count=(f"{NS_W}{SEP}comment",))
            comments += sub.elements[f"{NS_W}{SEP}comment"]
            pictures.update(_placed(package, name, sub))
        counts["comments"] = comments
        bullets = _picture_bullets(package) if NUMBERING in package.names else set()
        counts["images"] = len(set(pictures.values()) | shared | bullets)
        inventory.placed_pictures = len(pictures) + len(shared) + len(bullets)
    except Exception:
        pass


def _placed(package: Package, name: str, part: Part) -> dict[tuple[str, str], str]:
    return {(name, rid): target for rid, target in picture_references(package, name, part).items()}


def _picture_bullets(package: Package) -> set[str]:
    """The media parts of the picture bullets (``w:numPicBullet``) that a list level uses: a .doc keeps them as
    pictures in hidden text, which its count includes."""
    bullets: dict[str, set[str]] = {}
    used: set[str] = set()
    state: dict[str, str] = {}
    bullet, level = f"{NS_W}{SEP}numPicBullet", f"{NS_W}{SEP}lvlPicBulletId"
    imagedata = f"{NS_V}{SEP}imagedata"
    value = f"{NS_W}{SEP}val"

    def start(tag: str, attributes: dict[str, str]) -> None:
        if tag == bullet:
            state["bullet"] = attributes.get(f"{NS_W}{SEP}numPicBulletId", "")
            bullets.setdefault(state["bullet"], set())
        elif tag == level:
            used.add(attributes.get(value, ""))
        elif tag == imagedata and "bullet" in state:
            rid = attributes.get(f"{NS_R}{SEP}id") or attributes.get(f"{NS_O}{SEP}relid")
            if rid:
                bullets[state["bullet"]].add(rid)

    def end(tag: str) -> None:
        if tag == bullet:
            state.pop("bullet", None)

    package.parse(NUMBERING, start, end)
    relationships = package.relationships(NUMBERING)
    found: set[str] = set()
    for rid in (rid for key in used & bullets.keys() for rid in bullets[key]):
        rel_type, target = relationships.get(rid, ("", None))
        if target and rel_type == IMAGE_RELATIONSHIP and target in package.names:
            found.add(target)
    return found

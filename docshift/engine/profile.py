"""LibreOffice's profile as the engine sets it up, and the network namespace it runs in without its sandbox.

Its settings turn macros off and links' updates off (``PROFILE_SETTINGS``), and name the installed version as the
last one started, so that no start is a first start (``with_version``).
"""

import functools
import logging
import os
import re
import shutil
import subprocess
from pathlib import Path

log = logging.getLogger("docshift.office")

# No DisableActiveContent: LibreOffice then drops every embedded object and chart on load. Linked
# content stays out without it: links are never updated (UpdateDocMode on load, the Link settings
# below), and what LibreOffice would still fetch to show a linked picture cannot be reached from the
# sandbox, which has no network and sees no host file but its job (tests/engine/test_sandbox.py).
# The gallery's write path lies under a file, where nothing can be written (not even by root, outside the sandbox):
# importing a .ppt, LibreOffice writes each of its sounds into the user gallery and registers it there, and takes a
# later file's sound of the same name from there instead of that file's own. Every child of a parent shares its
# profile, so an account's sound was in the next account's result (tests/engine/test_tenants.py).
PROFILE_SETTINGS = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema"
           xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="MacroSecurityLevel" oor:op="fuse"><value>3</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="DisableMacrosExecution" oor:op="fuse"><value>true</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="BlockUntrustedRefererLinks" oor:op="fuse"><value>true</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="UseOpenCL" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="FirstRun" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Office.Writer/Content/Update"><prop oor:name="Link" oor:op="fuse"><value>0</value></prop></item>
<item oor:path="/org.openoffice.Office.Calc/Content/Update"><prop oor:name="Link" oor:op="fuse"><value>1</value></prop></item>
<item oor:path="/org.openoffice.Office.Paths/Paths/Gallery"><prop oor:name="WritePath" oor:op="fuse"><value>$(userurl)/registrymodifications.xcu/gallery</value></prop></item>
{kept_fonts}</oor:items>
"""

# LibreOffice's .xlsx and .pptx exports (and its .ppt import) write each font name its font substitution table gives
# an "MS" substitute for as that substitute: a workbook's Helvetica becomes Arial, Times becomes Times New Roman,
# Courier becomes Courier New, and Algerian, a font Office itself installs, becomes "comic", a name no font has.
# Excel and PowerPoint keep the name a file gives, and Windows and macOS find a font for each of these. So the
# substitutes of the names that legacy files give (the table's entries for fonts of Windows, the Mac, printers and
# Linux that LibreOffice does not ship) are taken away here; each such name then stays as the file gives it. The
# substitutes of LibreOffice's own fonts stay: its Liberation Sans, the font of its default cell style, is still
# written as Arial, as a plain soffice writes it. The entries are those of LibreOffice 25.2's table (VCL.xcu).
KEPT_FONT_NAMES = ("algerian", "andalesans", "andalesansui", "andalewtui", "batang", "courier", "garuda", "gothic",
                   "gothicb", "gothicl", "helmet", "helv", "helvetica", "norasi", "pgothic", "sansl", "sansserif",
                   "times", "timesroman", "timmons", "tmsrmn")
KEPT_FONT_ITEM = ("<item oor:path=\"/org.openoffice.VCL/FontSubstitutions/org.openoffice.VCL:LocalizedFontSubstitutions"
                  "['en']/org.openoffice.VCL:LFonts['{}']\"><prop oor:name=\"SubstFontsMS\" oor:op=\"fuse\"><value/>"
                  "</prop></item>\n")
PROFILE_SETTINGS = PROFILE_SETTINGS.format(kept_fonts="".join(KEPT_FONT_ITEM.format(key) for key in KEPT_FONT_NAMES))

# A profile that names no earlier version is a first start: LibreOffice then runs its graphics render tests
# and its first-start setup, about 0.7 s of CPU on every start of a fresh profile (launch 1.08 s -> 0.38 s
# with the item, on this machine). Its own registry says which version is installed.
VERSION_ITEM = ('<item oor:path="/org.openoffice.Setup/Product"><prop oor:name="ooSetupLastVersion" oor:op="fuse">'
                '<value>{}</value></prop></item>\n')
REGISTRY_VERSION = re.compile(rb'oor:name="ooSetupVersion"[^<]*<value>([0-9][0-9.]*)</value>')


@functools.cache
def installed_version() -> str | None:
    """The version of the LibreOffice that ``soffice`` on PATH starts, as its registry names it ("25.2"),
    or None when it cannot be read (every start is then a first start: slower, nothing else)."""
    soffice = shutil.which("soffice")
    if soffice is None:
        return None
    registry = Path(os.path.realpath(soffice)).parent.parent / "share" / "registry"
    for xcd in sorted(registry.glob("*.xcd")):
        try:
            found = REGISTRY_VERSION.search(xcd.read_bytes())
        except OSError:
            continue
        if found:
            return found.group(1).decode()
    return None


def with_version(settings: str) -> str:
    """``settings`` (a registrymodifications.xcu) naming the installed LibreOffice as the last one started."""
    version = installed_version()
    if version is None or "ooSetupLastVersion" in settings:
        return settings
    return settings.replace("</oor:items>", VERSION_ITEM.format(version) + "</oor:items>")


# the fallback of DOCSHIFT_SANDBOX=off: as root; else through an unprivileged user namespace, where the kernel allows one (Debian does)
NAMESPACE_PREFIXES = (["unshare", "--net", "--"], ["unshare", "--user", "--map-root-user", "--net", "--"])
_netns: list[str] | None = None


def network_namespace() -> list[str]:
    """The command prefix that puts LibreOffice in a network namespace with no network, or []."""
    global _netns
    if _netns is None:
        _netns = []
        for prefix in NAMESPACE_PREFIXES:
            try:
                if subprocess.run(prefix + ["true"], capture_output=True, timeout=10).returncode == 0:
                    _netns = prefix
                    break
            except (OSError, subprocess.TimeoutExpired):
                continue
        if not _netns:
            log.warning("no network namespace can be made here: LibreOffice runs with the host's network")
    return _netns

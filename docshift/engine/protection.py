"""A protected source opened with its password, and its result protected by that password again.

``open_source`` runs ``decrypt.py`` (msoffcrypto-tool) on the upload in a subprocess of the worker, under
limits on its CPU time, memory, file size and open files, with none of the worker's environment, at nice 10:
it checks the password against the file's verifier (``wrong_password`` when it is not the one), refuses what
nothing here opens (``encryption_unsupported``: a package whose key would take more than ``MAX_SPIN_COUNT``
rounds, as the pre-check bounds it), and writes the file decrypted. LibreOffice then loads the source itself
with its ``Password`` load property where its import decrypts (Word RC4 and CryptoAPI, Excel XOR, RC4 and 40-bit
CryptoAPI), and the decrypted copy where it cannot (PowerPoint, Excel's 128-bit "strong" provider, encrypted
packages). The checks that read the legacy file (the fidelity report's inventory, the VBA project, what the
result's links may name) read the decrypted copy, and so see what the customer's file holds.

Why a subprocess and not LibreOffice's sandbox: the sandbox runs Debian's python3, which sees ``/usr`` only,
and msoffcrypto-tool and its ``cryptography`` live in the worker's virtualenv, for the worker's interpreter.
msoffcrypto-tool is Python reading bytes: a hostile file can make it spend CPU and memory, which the limits
bound, but not run anything; the subprocess gets the password on stdin, never in its arguments or environment.

``protect`` encrypts a checked result with the password (ECMA-376 agile encryption, AES-256 with its key
derived in Office's 100,000 rounds), after the output checks and the fidelity report have read it decrypted.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from msoffcrypto.method.ecma376_agile import ECMA376Agile

from docshift.contract import TaskErrorCode
from docshift.engine.precheck import DEFAULT_PASSWORD, MAX_SPIN_COUNT
from docshift.errors import ConversionFailed

log = logging.getLogger("docshift.engine")

DECRYPTOR = Path(__file__).resolve().with_name("decrypt.py")
CPU_SECONDS = 30         # a 4 MiB file decrypts in well under a second
MEMORY_BYTES = 1 << 30   # address space: Python, cryptography and a few copies of the file
OPEN_FILES = 64
TIMEOUT_SECONDS = 60
LEGACY_PASSWORD_LIMIT = 15  # characters of a password that Office 97-2003's encryption keeps (``decrypt.py``)
# the schemes LibreOffice's own import decrypts, given the password (LIBREOFFICE.md, measured): it loads the
# source itself; the decrypted copy only if it returns nothing (Excel's 128-bit "strong" provider)
NATIVE = ("doc97 rc4", "doc97 rc4_cryptoapi", "doc97 xor", "xls97 rc4", "xls97 rc4_cryptoapi", "xls97 xor")
WRONG = "The Document-Password does not open this file."
UNSUPPORTED = "The file is protected in a way that cannot be opened here, even with its password."
NOT_DECRYPTED = "The protected file could not be decrypted."


@dataclass(frozen=True)
class Opened:
    """A protected source and the password that opens it (of a longer one, the 15 characters Office 97-2003 kept)."""
    password: str
    scheme: str             # how it is protected ("doc97 rc4", "ppt97 rc4_cryptoapi", "ooxml agile", ...)
    plain: Path | None      # the source decrypted, where msoffcrypto-tool knows its scheme
    native: bool            # LibreOffice loads the source itself, with its Password load property, first
    verified: bool = False  # the file's verifier took the password, though it could not be decrypted here

    def loads(self, source: Path) -> list[tuple[Path, str | None]]:
        """What LibreOffice is given to load, in turn until one loads: (file, the Password load property)."""
        tries: list[tuple[Path, str | None]] = [(source, self.password)] if self.native else []
        return tries + ([(self.plain, None)] if self.plain is not None else [])


def open_source(source: Path, kind: str, password: str, workdir: Path, file_limit: int) -> Opened | None:
    """Open ``source`` (of ``kind``) with ``password``; None when it is not protected (or only by the default
    password Excel opens without asking): the password is then ignored. Raises ConversionFailed with
    ``wrong_password``, ``encryption_unsupported`` or, when the decryptor broke, ``conversion_failed``.
    ``file_limit``: the largest file the decryptor may write."""
    plain = workdir / "decrypted" / source.name  # the customer's name: LibreOffice shows it in FILENAME fields
    plain.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    request = {"source": str(source), "target": str(plain), "kind": kind, "password": password,
               "max_spin_count": MAX_SPIN_COUNT}
    answer = _decrypt(request, file_limit)
    outcome, scheme = answer.get("outcome"), str(answer.get("scheme", ""))
    log.info("protected source %s: %s (%s)", source.name, outcome, scheme or "unknown scheme")
    if outcome == "plain":
        return None
    if outcome == "wrong":
        raise ConversionFailed(TaskErrorCode.WRONG_PASSWORD, WRONG)
    if outcome == "unsupported":
        log.warning("protected source %s not opened: %s %s", source.name, scheme, answer.get("detail", ""))
        raise ConversionFailed(TaskErrorCode.ENCRYPTION_UNSUPPORTED, UNSUPPORTED)
    if outcome == "unverified":  # LibreOffice alone may open it: its import takes the password
        return Opened(password, scheme, None, True)
    if outcome == "verified" and scheme in NATIVE:  # the right password, and LibreOffice's import decrypts
        log.info("protected source %s: decrypted by LibreOffice alone (%s)", source.name, answer.get("detail", ""))
        return Opened(password, scheme, None, True, verified=True)
    if outcome == "verified":
        raise ConversionFailed(TaskErrorCode.ENCRYPTION_UNSUPPORTED, UNSUPPORTED)
    if outcome == "decrypted" and plain.is_file():
        if str(answer.get("detail", "")).startswith("first"):  # what Office 97-2003 keeps of a longer password
            password = password[:LEGACY_PASSWORD_LIMIT]
        return Opened(password, scheme, plain, scheme in NATIVE)
    raise ConversionFailed(TaskErrorCode.CONVERSION_FAILED, NOT_DECRYPTED)


def open_default(source: Path, kind: str, workdir: Path, file_limit: int) -> Opened | None:
    """A workbook encrypted with Excel's default password, "VelvetSweatshop" (``precheck.workbook_default_password``:
    Excel writes it so when a workbook's structure is protected; Excel and LibreOffice open it without asking),
    opened with that password, so that the checks that read the legacy file read what it holds: read encrypted,
    its sheets, cells and parts were all unknown to the fidelity report. None when the decryptor does not open it
    after all: LibreOffice then loads it as it is. The result is not protected: the customer gave no password."""
    try:
        return open_source(source, kind, DEFAULT_PASSWORD, workdir, file_limit)
    except ConversionFailed:
        return None


def _decrypt(request: dict[str, object], file_limit: int) -> dict[str, object]:
    """``decrypt.py``'s answer to ``request``, run in its limits."""
    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))
        resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a core dump would hold the password
        os.nice(10)

    try:
        # -I: none of the environment's PYTHON* variables, no user site, not the script's directory on sys.path
        done = subprocess.run([sys.executable, "-I", str(DECRYPTOR)], input=json.dumps(request) + "\n",
                              capture_output=True, text=True, timeout=TIMEOUT_SECONDS, cwd="/",
                              env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, preexec_fn=limits)
    except subprocess.TimeoutExpired:
        log.warning("the decryptor took longer than %d s", TIMEOUT_SECONDS)
        return {}
    try:
        answer = json.loads(done.stdout.splitlines()[0]) if done.stdout else {}
    except ValueError:
        answer = {}
    if not isinstance(answer, dict) or done.returncode != 0:
        # its last line only: a traceback names the code, never a value
        last = done.stderr.strip().splitlines()[-1:] if done.stderr else []
        log.warning("the decryptor failed (exit %s): %s", done.returncode, last[0][:300] if last else "")
        return {}
    return answer


def protect(result: Path, password: str) -> None:
    """Encrypt the OOXML file ``result`` in place with ``password`` (ECMA-376 agile, as Office does)."""
    protected = result.with_name(result.name + ".protected")
    with open(result, "rb") as plain:
        protected.write_bytes(ECMA376Agile.encrypt(password, plain))
    os.replace(protected, result)

"""The passwords ``docshift convert`` opens protected files with: ``--password-file`` (lines
``relative/path<TAB>password``, or ``*<TAB>password`` for every file not named) or ``DOCSHIFT_DOCUMENT_PASSWORD`` for
all. Never an argument: a command line shows in ``ps`` and in the shell's history. A password is only sent, as the
Document-Password header; the state file and the report never hold it."""

import os
from pathlib import Path, PurePosixPath

ENVIRONMENT = "DOCSHIFT_DOCUMENT_PASSWORD"
EVERY_FILE = "*"
LONGEST = 255  # characters, as the service takes them
UNSENDABLE = ("a password that begins or ends with a space or a tab, or holds a control character, cannot travel "
              "in the Document-Password header; change it in Office, or convert that file there.")


class Passwords:
    """{relative path: password}, and the one for every other file (None: no password is sent)."""

    def __init__(self, named: dict[str, str] | None = None, default: str | None = None) -> None:
        self.named, self.default = named or {}, default

    def __repr__(self) -> str:
        return f"Passwords({len(self.named)} named{', and a default' if self.default is not None else ''})"

    def __bool__(self) -> bool:
        return bool(self.named) or self.default is not None

    def of(self, rel: PurePosixPath) -> str | None:
        """The password for the file at ``rel`` under the folder it was found in (its bare name when given alone)."""
        return self.named.get(str(rel), self.default)


def load(password_file: str | None) -> Passwords:
    """The passwords of ``password_file`` and of the environment (the default for files the file does not name).
    Raises ValueError saying which line is wrong, never what it holds."""
    default = os.environ.get(ENVIRONMENT) or None
    named: dict[str, str] = {}
    if password_file is not None:
        try:
            text = Path(password_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"cannot read the password file {password_file}: "
                             f"{getattr(error, 'strerror', None) or 'not UTF-8 text'}.") from None
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip() or line.startswith("#"):
                continue
            path, tab, password = line.partition("\t")
            if not tab or not path or not password:
                raise ValueError(f"{password_file}, line {number}: not 'relative/path<TAB>password'.")
            if len(password) > LONGEST:
                raise ValueError(f"{password_file}, line {number}: a password is at most {LONGEST} characters.")
            if not sendable(password):
                raise ValueError(f"{password_file}, line {number}: {UNSENDABLE}")
            if path == EVERY_FILE:
                default = password
            else:
                named[str(PurePosixPath(path.replace(os.sep, "/")))] = password
    if default is not None and len(default) > LONGEST:
        raise ValueError(f"{ENVIRONMENT}: a password is at most {LONGEST} characters.")
    if default is not None and not sendable(default):
        raise ValueError(f"{ENVIRONMENT}: {UNSENDABLE}")
    return Passwords(named, default)


def sendable(password: str) -> bool:
    """Whether an HTTP header can carry ``password`` as it is: a field value is one line of visible characters,
    spaces and tabs, and the spaces and tabs around it are not part of it."""
    return password == password.strip(" \t") and not any(c != "\t" and (ord(c) < 32 or ord(c) == 127)
                                                          for c in password)

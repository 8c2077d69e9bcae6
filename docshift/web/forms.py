"""The request class of the app: werkzeug's, except that a form over its limits of parts
(``MAX_FORM_PARTS``) or of text-field size (``MAX_FORM_MEMORY_SIZE``) is a 400
``invalid_request``. werkzeug answers those with 413, the status SPEC keeps for a file
over the upload limit. And the file part's name as the client sent it (``sent_filename``)."""

import re
from typing import IO, Any

from flask import Request
from werkzeug.datastructures import FileStorage
from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.formparser import FormDataParser

from docshift.errors import InvalidRequest


class _WatchedBody:
    """The body stream, noting whether reading it went past MAX_CONTENT_LENGTH."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream, self.over_limit = stream, False

    def read(self, *args: Any) -> bytes:
        try:
            return self.stream.read(*args)
        except RequestEntityTooLarge:
            self.over_limit = True
            raise


class FormParser(FormDataParser):
    def _parse_multipart(self, stream: IO[bytes], mimetype: str, content_length: int | None,
                         options: dict[str, str]) -> Any:
        body = _WatchedBody(stream)
        try:
            # werkzeug only reads the stream it is given
            _, form, files = super()._parse_multipart(body, mimetype, content_length, options)  # type: ignore[arg-type]
        except RequestEntityTooLarge:
            if body.over_limit:  # the body itself is too large: 413 file_too_large
                raise
            raise InvalidRequest("Send exactly one form part, named 'file', holding the file.") from None
        except UnicodeDecodeError:  # werkzeug would drop the whole form and say nothing
            raise InvalidRequest("A form part's headers are not UTF-8: send the file name in UTF-8, or as "
                                 "filename*=UTF-8''<its UTF-8 bytes, percent-encoded>.") from None
        return stream, form, files


class DocshiftRequest(Request):
    form_data_parser_class = FormParser


# a part's quoted file name as it was sent, and a backslash in it that escapes nothing (RFC 9110's quoted-pair escapes
# a quote or a backslash; a browser sends neither so)
_FILENAME = re.compile(r'(?:^|;)\s*filename\s*=\s*"((?:[^"\\]|\\.)*)"', re.IGNORECASE)
_LITERAL_BACKSLASH = re.compile(r'\\[^\\"]')


def sent_filename(upload: FileStorage) -> str:
    """The name the client gave its file part: werkzeug's reading of its Content-Disposition, except where the
    quoted name holds backslashes that escape nothing, as a Windows path sent whole does. Browsers and urllib3 send
    a name's backslashes as they are (HTML's form encoding escapes quotes and line breaks only, as %22, %0D and
    %0A); werkzeug took each for an escape and dropped it, so that ``C:\\Users\\ann\\a.doc`` was kept as
    ``C:Usersanna.doc``, not as its last component."""
    disposition = upload.headers.get("Content-Disposition", "")
    sent = _FILENAME.search(disposition)
    if sent and "filename*" not in disposition.lower() and _LITERAL_BACKSLASH.search(sent.group(1)):
        return sent.group(1)
    return upload.filename or ""

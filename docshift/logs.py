"""JSON log lines for every docshift process, tagged with the request or task they belong to.

No query string, key or file content is ever logged (a registration link's token
would otherwise sit in the log).
"""

import json
import logging


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {"ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"), "level": record.levelname,
                "logger": record.name, "message": record.getMessage()}
        for tag in ("request_id", "task_id"):
            value = getattr(record, tag, None)
            if value:
                line[tag] = value
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line)


def configure(*filters: logging.Filter, libraries: tuple[str, ...] = ()) -> None:
    """JSON lines on stderr for the docshift loggers (once per process), and for the warnings and errors of
    the ``libraries``' loggers (huey's, in the worker), which would otherwise reach stderr as plain text."""
    _json_lines("docshift", logging.INFO, filters)
    for name in libraries:
        _json_lines(name, logging.WARNING, filters)


def _json_lines(name: str, level: int, filters: tuple[logging.Filter, ...]) -> None:
    logger = logging.getLogger(name)
    if any(isinstance(h.formatter, JsonFormatter) for h in logger.handlers):
        return
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    for log_filter in filters:
        handler.addFilter(log_filter)
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False

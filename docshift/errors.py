"""Every exception docshift raises on purpose, by layer, all under ``DocshiftError``.

Settings say which variable is wrong, storage speaks in its own terms (never a driver's
exception), the engine sorts LibreOffice's failures into the documented task error codes,
the marketplace says whether a token or the marketplace itself failed, and the API's errors
carry their problem code (``docshift.web.problems`` gives each its HTTP status and renders it).
"""

from collections.abc import Mapping

from docshift.contract import ProblemCode, TaskErrorCode


class DocshiftError(Exception):
    """The root of every exception docshift raises on purpose."""


class BadSetting(DocshiftError, ValueError):
    """A setting that cannot work (a wrong type, out of range, an open Redis): the process does not start."""


# storage ----------------------------------------------------------------------

class StorageUnavailable(DocshiftError):
    """The database or the object store did not answer; retry later."""


class DatabaseUnavailable(StorageUnavailable):
    """SQLite could not be opened or stayed locked past its busy timeout."""


class StoreUnavailable(StorageUnavailable):
    """The S3 object store refused or did not answer."""


class SpoolFull(StoreUnavailable):
    """The disk where one box keeps uploads until their run has no room left."""


class QueueUnavailable(StorageUnavailable):
    """The queue's Redis (conversion nodes) refused or did not answer."""


class InputMissing(DocshiftError):
    """The stored input of a task is gone (past the bucket's lifecycle rule, or removed): the task
    can never run; it fails ``input_missing``."""


class IdempotencyKeyTaken(DocshiftError):
    """Another request committed a task with this Idempotency-Key first."""


class TooManyUnfinished(DocshiftError):
    """The account already has as many QUEUED or PROCESSING tasks as it may."""


# the queues and conversion nodes -----------------------------------------------

class ForgedMessage(DocshiftError):
    """A queue message, an outcome or a Redis entry that is not ours: not signed with the queue
    key, or signed but out of bounds. Dropped and logged, never run nor applied."""


class NoProbe(DocshiftError):
    """No coordinator's probe in Redis: none started yet, or Redis restarted empty."""


class LeaseLost(DocshiftError):
    """The run no longer holds its task (it was taken back as stuck): it stores no result."""


class UploadCancelled(DocshiftError):
    """A run's result upload, begun beside the checks, stopped while it waited out an outage: the conversion failed."""


# the conversion engine ---------------------------------------------------------

class OfficeCrashed(DocshiftError):
    """LibreOffice died (or was killed) during a conversion."""


class OfficeTimeout(DocshiftError):
    """A conversion ran past its timeout; the process was killed."""


class Preempted(DocshiftError):
    """A conversion was stopped to give its slot to another account's waiting file (``storage/tasks.py``,
    ``to_preempt``); the task goes back to the queue without using an attempt."""


class ServiceFault(DocshiftError):
    """A fault of the service, not of the file: the task is retried without using one of its
    attempts and never ends FAILED for it (``docshift.tasks.faults``)."""


class EngineBroken(ServiceFault):
    """LibreOffice failed its self-test at every start in a row: the install is damaged (retry later)."""


class DiskFull(ServiceFault):
    """The disk of a job, a LibreOffice profile or a fetched input ran out of room."""


class SandboxUnavailable(DocshiftError):
    """bubblewrap is missing or cannot build the sandbox on this host."""


class ResultUnreadable(DocshiftError):
    """A part of a converted result the output checks read is missing or is not well-formed XML
    (``docshift.engine.ooxml``)."""


class InventoryUnreadable(DocshiftError):
    """A structure the fidelity inventory reads is broken, or reading it would exceed the budget:
    its count is unknown (``docshift.engine.inventory``)."""


class LoadFailed(DocshiftError):
    """LibreOffice could not load or store the document (the process is fine). ``stored``: it loaded it, and could
    not write its result; ``full``: the sandbox's scratch space was full then."""

    def __init__(self, detail: str = "", stored: bool = False, full: bool = False) -> None:
        super().__init__(detail)
        self.stored, self.full = stored, full


class ConversionFailed(DocshiftError):
    """A conversion that ends the task FAILED with ``code`` (never retried); ``detected_format``
    says what LibreOffice found in a file it refused."""

    def __init__(self, code: TaskErrorCode, message: str, detected_format: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.detected_format = detected_format


# the marketplace ----------------------------------------------------------------

class RegistrationTokenInvalid(DocshiftError):
    """The token is unknown, tampered with or expired."""


class MarketplaceUnavailable(DocshiftError):
    """The marketplace did not answer (throttled, down); try again later."""


class RegistrationRefused(DocshiftError):
    """The registration page turns a token away (missing, invalid, used) or, with ``busy``, could
    not ask the marketplace; ``message`` is what the customer is shown."""

    def __init__(self, message: str, busy: bool = False) -> None:
        super().__init__(message)
        self.message, self.busy = message, busy


# the API: one class per documented problem code ---------------------------------

class ApiError(DocshiftError):
    """A request the API refuses with ``code``; ``headers`` go with the answer (``Retry-After``)."""

    code = ProblemCode.INTERNAL_ERROR
    title = "Internal error"

    def __init__(self, detail: str | None = None, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(detail or self.title)
        self.detail = detail or self.title
        self.headers = dict(headers or {})


class MissingApiKey(ApiError):
    code, title = ProblemCode.MISSING_API_KEY, "Missing API key"


class InvalidApiKey(ApiError):
    code, title = ProblemCode.INVALID_API_KEY, "Invalid API key"


class SubscriptionInactive(ApiError):
    code, title = ProblemCode.SUBSCRIPTION_PENDING_OR_INACTIVE, "Subscription pending or inactive"


class TaskNotFound(ApiError):
    code, title = ProblemCode.TASK_NOT_FOUND, "Task not found"


class NotFound(ApiError):
    code, title = ProblemCode.NOT_FOUND, "Not found"


class MethodNotAllowed(ApiError):
    code, title = ProblemCode.METHOD_NOT_ALLOWED, "Method not allowed"


class IdempotencyConflict(ApiError):
    code, title = ProblemCode.IDEMPOTENCY_CONFLICT, "Idempotency-Key reused with another payload"


class TooManyTasks(ApiError):
    code, title = ProblemCode.TOO_MANY_TASKS, "Too many unfinished tasks"


class FileTooLarge(ApiError):
    code, title = ProblemCode.FILE_TOO_LARGE, "File too large"


class UnsupportedFileType(ApiError):
    code, title = ProblemCode.UNSUPPORTED_FILE_TYPE, "Unsupported file type"


class InvalidRequest(ApiError):
    code, title = ProblemCode.INVALID_REQUEST, "Invalid request"


class ServiceUnavailable(ApiError):
    code, title = ProblemCode.SERVICE_UNAVAILABLE, "Service unavailable"


# the command-line client ---------------------------------------------------------

class ClientProblem(DocshiftError):
    """What the ``docshift`` command could not do, shown as one line (never a traceback): ``code``
    is the service's problem code, or the client's own (``unreachable``, ``unexpected_response``,
    ``download_failed``); ``retry_after`` is the wait the service asked for, in seconds."""

    def __init__(self, code: str, detail: str, retry_after: float | None = None) -> None:
        super().__init__(detail)
        self.code, self.detail, self.retry_after = code, detail, retry_after

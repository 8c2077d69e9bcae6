"""Every exception docshift raises on purpose, by layer.

Storage speaks in its own terms (never a driver's exception), the engine sorts
LibreOffice's failures into the documented task error codes, the marketplace
says whether a token or the marketplace itself failed, and the API's errors
carry their HTTP status and problem code (``docshift.web.problems`` renders them).
"""


class DocshiftError(Exception):
    """The root of every exception docshift raises on purpose."""


class BadSetting(DocshiftError, ValueError):
    """A setting that cannot work (a wrong type, out of range, an open Redis): the process does not start."""


# storage ----------------------------------------------------------------------

class StorageUnavailable(Exception):
    """The database or the object store did not answer; retry later."""


class DatabaseUnavailable(StorageUnavailable):
    """SQLite could not be opened or stayed locked past its busy timeout."""


class StoreUnavailable(StorageUnavailable):
    """The S3 object store refused or did not answer."""


class InputMissing(Exception):
    """The stored input of a task is gone (past the bucket's lifecycle rule, or removed): the task
    can never run; it fails ``input_missing``."""


class IdempotencyKeyTaken(Exception):
    """Another request committed a task with this Idempotency-Key first."""


class TooManyUnfinished(Exception):
    """The account already has as many QUEUED or PROCESSING tasks as it may."""


# the queues and conversion nodes -----------------------------------------------

class ForgedMessage(Exception):
    """A queue message, an outcome or a Redis entry that is not ours: not signed with the queue
    key, or signed but out of bounds. Dropped and logged, never run nor applied."""


class LeaseLost(Exception):
    """The run no longer holds its task (it was taken back as stuck): it stores no result."""


# the conversion engine ---------------------------------------------------------

class OfficeCrashed(Exception):
    """LibreOffice died (or was killed) during a conversion."""


class OfficeTimeout(Exception):
    """A conversion ran past its timeout; the process was killed."""


class ServiceFault(Exception):
    """A fault of the service, not of the file: the task is retried without using one of its
    attempts and never ends FAILED for it (``docshift.tasks.faults``)."""


class EngineBroken(ServiceFault):
    """LibreOffice failed its self-test at every start in a row: the install is damaged (retry later)."""


class DiskFull(ServiceFault):
    """The disk of a job, a LibreOffice profile or a fetched input ran out of room."""


class LoadFailed(Exception):
    """LibreOffice could not load or store the document (the process is fine)."""


class ConversionFailed(Exception):
    """A conversion that ends the task FAILED with ``code`` (never retried); ``detected_format``
    says what LibreOffice found in a file it refused."""

    def __init__(self, code, message, detected_format=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.detected_format = detected_format


# The documented codes of a FAILED task (``error.code``), and what each means; a FAILED task is never billed.
TASK_ERROR_CODES = {
    "unsupported_content": "LibreOffice's type detection finds no document of the extension's family in the file "
                           "(plain text, an image, another family); `detected_format` says what it found.",
    "encrypted_document": "The file is password-protected.",
    "conversion_failed": "LibreOffice could not read or convert the file, or crashed on it twice.",
    "conversion_timeout": "The conversion took longer than the service's conversion timeout.",
    "output_invalid": "The result failed the checks against what LibreOffice loaded from the source.",
    "subscription_inactive": "The subscription became inactive before the conversion ran.",
    "input_missing": "The stored upload was gone before the conversion ran (inputs are kept at most a day, "
                     "for example after a long outage); submit the file again.",
}


# the marketplace ----------------------------------------------------------------

class RegistrationTokenInvalid(Exception):
    """The token is unknown, tampered with or expired."""


class MarketplaceUnavailable(Exception):
    """The marketplace did not answer (throttled, down); try again later."""


# the API: one class per documented problem code ---------------------------------

class ApiError(Exception):
    status = 500
    code = "internal_error"
    title = "Internal error"
    headers = {}

    def __init__(self, detail=None, headers=None):
        super().__init__(detail or self.title)
        self.detail = detail or self.title
        if headers:
            self.headers = {**self.headers, **headers}


class MissingApiKey(ApiError):
    status, code, title = 401, "missing_api_key", "Missing API key"
    headers = {"WWW-Authenticate": 'Bearer realm="docshift"'}


class InvalidApiKey(ApiError):
    status, code, title = 401, "invalid_api_key", "Invalid API key"
    headers = {"WWW-Authenticate": 'Bearer realm="docshift", error="invalid_token"'}


class SubscriptionInactive(ApiError):
    status, code, title = 403, "subscription_pending_or_inactive", "Subscription pending or inactive"


class TaskNotFound(ApiError):
    status, code, title = 404, "task_not_found", "Task not found"


class NotFound(ApiError):
    status, code, title = 404, "not_found", "Not found"


class MethodNotAllowed(ApiError):
    status, code, title = 405, "method_not_allowed", "Method not allowed"


class IdempotencyConflict(ApiError):
    status, code, title = 422, "idempotency_conflict", "Idempotency-Key reused with another payload"


class TooManyTasks(ApiError):
    status, code, title = 429, "too_many_tasks", "Too many unfinished tasks"


class FileTooLarge(ApiError):
    status, code, title = 413, "file_too_large", "File too large"


class UnsupportedFileType(ApiError):
    status, code, title = 415, "unsupported_file_type", "Unsupported file type"


class InvalidRequest(ApiError):
    status, code, title = 400, "invalid_request", "Invalid request"


class ServiceUnavailable(ApiError):
    status, code, title = 503, "service_unavailable", "Service unavailable"

-- docshift's tables. Idempotent: run at every start and by `flask --app app init-db`.
-- huey keeps its queue in a separate file (queue.db), so no name here clashes with its tables.
PRAGMA journal_mode = WAL;

CREATE TABLE IF NOT EXISTS accounts (
    id TEXT PRIMARY KEY,
    marketplace TEXT NOT NULL,
    customer_id TEXT NOT NULL,            -- the marketplace's id of the buyer
    license_arn TEXT,
    plan TEXT,                            -- NULL while an AWS customer has no entitlement yet
    status TEXT NOT NULL CHECK (status IN ('pending', 'active', 'inactive')),
    activated_at TEXT,                    -- start of the first contract period
    contract_ends_at TEXT,                -- the marketplace's entitlement expiry, where it gives one
    created_at TEXT NOT NULL,
    ran_long_at TEXT,                     -- when one of its conversions last ran long (the fair claim, storage/tasks.py)
    UNIQUE (marketplace, customer_id)
);

CREATE TABLE IF NOT EXISTS api_keys (
    key_hash TEXT PRIMARY KEY,            -- SHA-256 hex of the key; the key itself is never stored
    account_id TEXT NOT NULL REFERENCES accounts (id),
    hint TEXT NOT NULL,                   -- dsk_AbCd..., safe to show and log
    created_at TEXT NOT NULL,
    revoked_at TEXT
);
CREATE INDEX IF NOT EXISTS api_keys_account ON api_keys (account_id);

-- Registration tokens already used: each issues one key, once. Kept: a marketplace's token may
-- outlive any age of ours, and a row is written only for a token the marketplace vouched for.
CREATE TABLE IF NOT EXISTS used_registration_tokens (
    token_hash TEXT PRIMARY KEY,          -- SHA-256 hex of its id (token_id: what its spellings share); never the token
    marketplace TEXT NOT NULL,
    account_id TEXT NOT NULL REFERENCES accounts (id),
    used_at TEXT NOT NULL
);

-- One row per account and contract period; the counters of the allowance.
CREATE TABLE IF NOT EXISTS usage_periods (
    account_id TEXT NOT NULL REFERENCES accounts (id),
    started_at TEXT NOT NULL,
    ends_at TEXT NOT NULL,
    included_used INTEGER NOT NULL DEFAULT 0,
    overage_used INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (account_id, started_at)
);

CREATE TABLE IF NOT EXISTS conversions (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts (id),
    status TEXT NOT NULL CHECK (status IN ('QUEUED', 'PROCESSING', 'SUCCEEDED', 'FAILED', 'EXPIRED')),
    source_filename TEXT NOT NULL,
    source_type TEXT NOT NULL CHECK (source_type IN ('doc', 'xls', 'ppt')),
    source_size INTEGER NOT NULL,
    source_sha256 TEXT NOT NULL,
    idempotency_key TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    worker TEXT,                          -- host:pid of the worker holding it; with attempts, the lease
    billing_class TEXT CHECK (billing_class IN ('INCLUDED', 'OVERAGE')),
    period_started_at TEXT,               -- the usage period this success was counted in
    result_size INTEGER,
    error_code TEXT,
    error_message TEXT,
    detected_format TEXT,                 -- what LibreOffice recognised in the upload (formats.detected_format)
    macros TEXT NOT NULL DEFAULT 'keep' CHECK (macros IN ('keep', 'remove')),  -- the client's choice for a VBA project
    result_extension TEXT,                -- docx, docm, ...: the result's type (a VBA project makes it macro-enabled)
    protection TEXT NOT NULL DEFAULT 'keep' CHECK (protection IN ('keep', 'remove')),  -- a protected source's result: protected again, or not
    sealed_password TEXT,                 -- Document-Password, sealed (passwords.py); NULL from the moment the task is final
    password_digest TEXT,                 -- keyed hash of it, beside an idempotency_key only (replays compare it); never the password
    filename_digest TEXT,                 -- SHA-256 of the file name as the client sent it (source_filename is cleaned), beside an idempotency_key only
    fidelity TEXT,                        -- JSON: what the source holds against what the result holds
    result_key TEXT,                      -- where the result is in the bucket: the key its run's lease named
    created_at TEXT NOT NULL,
    started_at TEXT,
    finished_at TEXT,
    result_expires_at TEXT,
    input_deleted INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX IF NOT EXISTS conversions_idempotency
    ON conversions (account_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS conversions_status ON conversions (status);
-- the fair claim and the per-account cap: what each account has waiting, running, last served
CREATE INDEX IF NOT EXISTS conversions_account_status ON conversions (account_id, status, created_at);
CREATE INDEX IF NOT EXISTS conversions_account_started ON conversions (account_id, started_at);
-- the fair claim's reserve: which accounts started a conversion lately
CREATE INDEX IF NOT EXISTS conversions_started ON conversions (started_at);

-- Overage reported to the marketplace, one row per account and hour. A row is written
-- 'pending' before it is sent and 'sent' after, so a crash in between re-sends the same
-- hour-truncated record, which the marketplace answers as a duplicate: never lost, never doubled.
CREATE TABLE IF NOT EXISTS overage_reports (
    account_id TEXT NOT NULL REFERENCES accounts (id),
    hour TEXT NOT NULL,                   -- start of the hour the overage happened in
    quantity INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'sent', 'not_subscribed', 'missed')),
    metering_record_id TEXT,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (account_id, hour)
);

-- Running totals the worker keeps for /metrics (LibreOffice restarts).
CREATE TABLE IF NOT EXISTS tallies (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);

-- What each worker process runs LibreOffice with, and whether it passes its self-test; read by /healthz.
CREATE TABLE IF NOT EXISTS engines (
    worker TEXT PRIMARY KEY,              -- host:pid of the worker process
    sandbox TEXT NOT NULL CHECK (sandbox IN ('on', 'off')),
    state TEXT NOT NULL CHECK (state IN ('starting', 'ok', 'broken')),
    detail TEXT,                          -- why it is broken
    updated_at TEXT NOT NULL
);

-- Liveness: 'worker' (any worker process, read by /healthz) and 'worker:<host>:<pid>' for each.
CREATE TABLE IF NOT EXISTS heartbeats (
    name TEXT PRIMARY KEY,
    beat_at TEXT NOT NULL
);

-- Service keys: credentials of chat servers, which act for all their users
-- (docs/api.md, Service keys). The one deliberate cross-user table: a key
-- belongs to a server, not to a user, so it has no user_id and no query on it
-- touches a user's memory. The secret is not stored: only sha256 of it (a
-- 256-bit random secret needs no slow hash), looked up by the key's id.
CREATE TABLE service_key (
    id           text        PRIMARY KEY CHECK (id ~ '^[0-9a-f]{12}$'),
    name         text        NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    secret_hash  bytea       NOT NULL CHECK (length(secret_hash) = 32),
    scopes       text[]      NOT NULL
                 CHECK (cardinality(scopes) > 0
                        AND scopes <@ ARRAY['handover', 'read', 'admin']::text[]),
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz
);

-- Erase fences are keyed by HMAC-SHA-256 of the user id under
-- MEMFLEET_ERASE_FENCE_KEY (worker.fence_key), no longer by sha256 of the id,
-- which a dictionary of likely ids (emails, phone numbers) reverses. Fences of
-- the previous release go now rather than in eight days: they can only protect
-- against jobs of that release still in flight, and a release that brings a
-- migration is deployed with the workers drained (docs/operations.md, Upgrade).
DELETE FROM memory_erasure_fence;

-- Which key the fleet's fences are written with: a check value (an HMAC of a
-- fixed text under the key, not the key), recorded by the first process that
-- runs with a key. A process whose key gives another value refuses to commit
-- or erase: fences under two keys would not see each other.
CREATE TABLE memory_erasure_fence_key (
    only_row  boolean     PRIMARY KEY DEFAULT true CHECK (only_row),
    key_check bytea       NOT NULL,
    set_at    timestamptz NOT NULL DEFAULT now()
);

-- Schema learning in its own worker (docs/adr/0041-schemas-learned-by-their-own-worker.md).
-- The flush notes, in the transaction that stores them, which of its batch's events are new: one row per
-- batch. The learn worker takes notes (FOR UPDATE SKIP LOCKED: several workers share them, never one note),
-- reads their events, merges them into the schema states and deletes the notes in that same transaction, so
-- every stored event is learned exactly once, whoever learns it and whatever dies on the way.
-- first_at/last_at bound the events' received_at, so reading them prunes the events partitions.
-- No foreign key: an event gone before it was learned (retention, erasure, its endpoint deleted) is skipped.
CREATE TABLE schema_learn_queue (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_ids text[] NOT NULL,
    first_at  timestamptz NOT NULL,
    last_at   timestamptz NOT NULL,
    noted_at  timestamptz NOT NULL DEFAULT now()
);

-- The outbox: one row per event, written in the business transaction (columns: docs/operations.md, "The outbox table, topics and headers").
-- payload is bytes so one connector config (BinaryDataConverter) carries Avro and JSON unchanged.
CREATE TABLE ${outbox} (
  id            uuid        PRIMARY KEY,
  aggregate_type text       NOT NULL CHECK (aggregate_type ~ '^[A-Za-z0-9._-]+$'),
  aggregate_id  text        NOT NULL,
  event_type    text        NOT NULL CHECK (event_type <> ''),
  payload       bytea       NOT NULL,
  content_type  text        NOT NULL CHECK (content_type IN ('application/json', 'application/vnd.apache.avro+binary')),
  traceparent   text        NULL,
  -- JSON object of extra headers the router restores on the consumer side (our addition to the contract)
  headers       text        NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  -- the polling relay's bookkeeping; CDC ignores both
  published_at  timestamptz NULL,
  attempts      int         NOT NULL DEFAULT 0
);

-- The polling relay claims unpublished rows oldest first; CDC never reads this index.
CREATE INDEX ${outboxUnpublishedIndex} ON ${outbox} (created_at) WHERE published_at IS NULL;

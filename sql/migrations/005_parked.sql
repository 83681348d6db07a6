-- Dead-lettered events per consumer and key. While a key has a row here, the router sends its later
-- events to the dead-letter topic too, so order per key is never broken silently; a replayed event
-- (dlq:replay) that is the key's earliest parked one is applied and its row deleted in the same
-- transaction as its inbox row. The key is released when its last row is gone.
CREATE TABLE ${parked} (
  consumer       text        NOT NULL,
  aggregate_type text        NOT NULL,
  aggregate_id   text        NOT NULL,
  event_id       text        NOT NULL,
  seq            bigserial   NOT NULL,
  error_code     text        NOT NULL,
  parked_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (consumer, aggregate_type, aggregate_id, event_id)
);

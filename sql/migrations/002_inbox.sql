-- The inbox: a consumer's record of applied events. Inserted in the handler's transaction, so the
-- effect and the row commit together and a redelivered event is recognised (docs/router.md).
CREATE TABLE ${inbox} (
  consumer     text        NOT NULL,
  message_id   uuid        NOT NULL,
  processed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (consumer, message_id)
);

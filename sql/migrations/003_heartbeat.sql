-- Written by Debezium's heartbeat.action.query. It is in the publication, so an idle outbox still
-- lets the connector confirm a recent LSN and the slot stops pinning WAL.
CREATE TABLE ${heartbeat} (
  id      int         PRIMARY KEY CHECK (id = 1),
  beat_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO ${heartbeat} (id, beat_at) VALUES (1, now());

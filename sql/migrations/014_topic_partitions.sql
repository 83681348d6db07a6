-- The routed topics' partition counts as the toolkit last set or saw them (docs/operations.md, "Adding
-- partitions to a routed topic"). Adding partitions moves some keys to a new partition, and a key whose
-- earlier events are still unread in its old partition is then applied out of order (KAFKA-20030);
-- Kafka keeps no trace of when partitions were added. `outbox topics:grow` grows only once every named
-- consumer group has applied everything, and records the new count here; `outbox connector:deploy`
-- records the counts it finds. `outbox status` warns about a routed topic whose count differs from its
-- row: partitions added some other way. Written and read with the admin settings (config.database),
-- like the cleanup's registrations; no application role needs it.
CREATE TABLE ${topicPartitions} (
  topic text PRIMARY KEY,
  partitions integer NOT NULL CHECK (partitions > 0),
  recorded_at timestamptz NOT NULL DEFAULT now(),
  recorded_by text NOT NULL
);

-- 001 checked aggregate_type's characters in an unnamed CHECK. db:provision now keeps the outbox's limits
-- as named constraints (src/provision/outbox-limits.ts, the writer's limits from src/producer/limits.ts):
-- outbox_aggregate_type_topic checks the characters and the length of the topic name, next to the
-- payload, headers, traceparent and aggregate_id limits. A refused row then names the rule it broke.
ALTER TABLE ${outbox} DROP CONSTRAINT IF EXISTS ${outboxAggregateTypeCheck};

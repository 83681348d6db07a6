-- The polling relay deletes published rows after relay.retentionMs; without this index each cleanup
-- scans the whole table. Partial: CDC deployments never set published_at, so it stays empty for them.
CREATE INDEX ${outboxPublishedIndex} ON ${outbox} (published_at) WHERE published_at IS NOT NULL;

-- Our own publication for the outbox and heartbeat tables only: Debezium runs with
-- publication.autocreate.mode=disabled and never needs the superuser right that FOR ALL TABLES takes.
-- Deletes are not published: the insert-then-delete trick leaves nothing for the connector to drop.
CREATE PUBLICATION ${publication} FOR TABLE ${outbox}, ${heartbeat} WITH (publish = 'insert, update');

-- The router loads only each parked key's head (its earliest row by seq) per batch, and after a
-- release reads the key's next head: one index probe each, however many events a hot key has parked
-- (the primary key orders a key's rows by event_id, so it cannot give the earliest without reading all).
CREATE INDEX ON ${parked} (consumer, aggregate_type, aggregate_id, seq);

-- The router prunes its inbox rows older than router.inboxRetentionMs in small batches
-- (docs/operations.md, "Inbox retention"). Each batch reads the consumer's oldest rows: this index hands
-- them out in processed_at order, so a batch touches only the rows it deletes. A btree, not a BRIN:
-- pruning frees space in the oldest pages, new inserts refill it, and processed_at stops following the
-- physical order a BRIN summary depends on (its ranges widen until a prune reads most of the table); a
-- BRIN also cannot return the oldest rows first for a LIMIT. The price is one more btree entry per
-- applied event, on a key the primary key already leads with.
CREATE INDEX ${inboxProcessedIndex} ON ${inbox} (consumer, processed_at);

-- The protocol features each executor lists in its beats (ExecutorBeat v2), comma-separated,
-- ascending: which executors already verify round-signed triggers. Empty for executors whose
-- beats list none (written as v1 by a version before features).
ALTER TABLE executors ADD COLUMN features TEXT NOT NULL DEFAULT '';

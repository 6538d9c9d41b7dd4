"""Record schemas of the durable log and snapshots."""

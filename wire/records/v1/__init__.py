"""groupcoord.records.v1: the persisted record values."""

"""groupcoord.v1: the coordinator, share and streams gRPC services."""

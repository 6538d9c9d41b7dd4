"""Generated protobuf and gRPC code (from proto/, by `make proto`): the wire format every layer may import.

Installed as `groupcoord.wire`. It sits below the core and the clients, and imports nothing of ours.
"""

"""Fault injection for groupcoord: a loopback TCP proxy, and the Jepsen-style fault suite built on it."""

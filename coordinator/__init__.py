"""groupcoord's coordinator: a sans-I/O core (`groupcoord.coordinator.core`) wrapped by a runtime
(`groupcoord.coordinator.runtime`)."""

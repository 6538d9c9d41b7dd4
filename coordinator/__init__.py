"""groupcoord's coordinator: a sans-I/O core (`coordinator.core`) wrapped by a runtime (`coordinator.runtime`)."""

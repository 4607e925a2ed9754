"""Apache Storm: :mod:`.plan` (assignments a custom ``IScheduler`` applies)."""

"""Multi-process (one process per device) programs: replicas that must stay in step."""

"""The Temporal executor: a run is a Temporal workflow, every agent attempt an activity.

`wire` holds what travels through Temporal (plain dataclasses, cheap to import in the workflow
sandbox); `step` re-executes the script against the workflow's journal; `attempt` runs one agent
attempt; `workflow` is the durable driver; `worker` serves a task queue; `client` is the executor
the CLI talks to.
"""

"""The pi-subagents `workflowScript` dialect on piflow's engine: children, lanes and host steps."""

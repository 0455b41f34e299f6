"""The latency of a scripted agent that holds its run until the test is done with it.

A test that acts on a run while it works (pauses, stops or kills it, reads its owner) must not race
the run's end: an agent with this latency answers only after every wait of the tests that use it has
timed out, so the run works until the test stops it, kills its owner, or rewrites the fixture file
before a resume (a resume reads its run's fixture file again). A fixed short latency instead is a
bet on the machine's load. Two minutes, not more: an owner a failed test left behind ends soon.
"""

HOLD_MS = 120_000

#!/bin/sh
# A stand-in for a project's test command, for ci-gate.workflow.js: the first run in a checkout
# fails (as if a test broke), later runs pass (as if the fix landed). Replace it with your own.
if [ -f logs/.fixed ]; then
  echo "12 checks passed"
else
  mkdir -p logs && touch logs/.fixed
  echo "11 checks passed, 1 failed: test_order_totals (expected 42, got 41)" >&2
  exit 1
fi

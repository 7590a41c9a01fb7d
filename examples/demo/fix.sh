#!/bin/sh
# The demo's "agent" for `goalrun run --agent command --agent-bin ./fix.sh`.
#
# It fixes ONE bug per turn, on purpose: the first turn fixes Sum and stops,
# although Mean is still wrong — and claims "All tests pass now." without
# having run them, as agents do — so the check fails again and goalrun runs a
# second turn, which fixes Mean. The demo therefore passes after exactly two
# iterations, showing the loop (check → agent → check → agent → check) and an
# agent's word overtaken by goalrun's own check.
#
# goalrun gives the prompt (the task, the failing check's command, exit code
# and output tail) in $GOALRUN_PROMPT and on stdin; this script reads only
# the code. Its stdout is the turn's summary.
set -eu

# replace FILE OLD NEW: replace the text OLD with NEW in FILE, portably.
replace() {
	sed "s|$2|$3|" "$1" > "$1.tmp"
	mv "$1.tmp" "$1"
}

if grep -q 'for i := 1; i < len(xs); i++' calc.go; then
	replace calc.go 'for i := 1; i < len(xs); i++ { // bug: the loop starts at 1 and skips xs\[0\]' 'for i := 0; i < len(xs); i++ {'
	echo "Turn $GOALRUN_ITERATION: fixed Sum, which skipped the first element. All tests pass now."
elif grep -q 'len(xs)-1' calc.go; then
	replace calc.go 'float64(len(xs)-1) // bug: divides by one less than the count' 'float64(len(xs))'
	echo "Turn $GOALRUN_ITERATION: fixed Mean, which divided by one less than the count."
else
	echo "Turn $GOALRUN_ITERATION: found no known bug to fix."
fi

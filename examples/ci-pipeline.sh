#!/usr/bin/env bash
# A CI pipeline whose risky steps run through `undolog exec`: re-running a
# failed pipeline does not redo the steps that succeeded, the deploy waits for a
# person, and the last failed attempt rolls everything back in reverse order.
#
#   RUN=ci-$BUILD_ID bash examples/ci-pipeline.sh
#
# RUN names the undolog session (keep it across re-runs of the same pipeline).
# WORKDIR is where this demo "deploys" (default ./pipeline-work).
# FINAL_ATTEMPT=1 makes a failure roll the session back instead of leaving it
# for a re-run. The smoke test fails while $WORKDIR/break-smoke exists.
# A deploy a person rejected halts the session; once they resume it (undolog
# session resume $RUN --as NAME --reason WHY), a re-run asks them again: its
# deploy is a new call (the rejected one stays rejected), while a
# re-run after a deploy that ran replays it.
# On a shared PostgreSQL log with roles (docs/postgres.md, Roles), undo is an approver's:
# the job's role then needs undolog_approver too, or the rollback is run by a
# person (undolog undo $RUN --yes); an agent-only role gets exit 10 here.
set -euo pipefail

: "${RUN:?set RUN to the pipeline run id}"
W=${WORKDIR:-./pipeline-work}
mkdir -p "$W"
step() { echo "--- $*" >&2; }
# Whether the run's session is in state $1. grep reads the whole list (with
# pipefail, grep -q stopping early would fail the list on a closed pipe); a
# log not made yet holds no session, and its note is not shown.
state_is() { undolog session list --state "$1" -o ids 2>/dev/null | grep -xF -- "$RUN" >/dev/null; }
rollback() {
  # A rejection halted the session already: it is undone as it is.
  state_is halted || undolog session fail "$RUN" --reason "$1"
  undolog undo "$RUN" --yes
}

# A run done already is not run again; one a person halted waits for them.
if state_is completed; then
  echo "pipeline $RUN is done already" >&2
  exit 0
fi
if state_is compensated; then
  echo "pipeline $RUN was rolled back: run it again under a new RUN" >&2
  exit 7 # as undolog's: the session takes no new calls
fi
if state_is halted; then
  if [ "${FINAL_ATTEMPT:-0}" = 1 ]; then
    echo "pipeline $RUN was halted by a rejection: rolling back" >&2
    rollback "halted by a rejection"
  else
    echo "pipeline $RUN was halted by a rejection: resume it (undolog session resume $RUN --as NAME --reason WHY) and re-run, or roll it back (undolog undo $RUN --yes)" >&2
  fi
  exit 8
fi

on_failure() {
  local code=$?
  if [ "$code" = 123 ]; then
    # Another run of $RUN runs this step now: it is not this run's failure,
    # and nothing is rolled back under it.
    echo "pipeline $RUN is running elsewhere (exit 123): let that run finish" >&2
    exit 123
  fi
  state_is halted && code=8 # a person rejected a step: 8, as on a re-run
  if [ "${FINAL_ATTEMPT:-0}" = 1 ]; then
    echo "pipeline failed (exit $code) on its final attempt: rolling back" >&2
    rollback "pipeline failed with exit $code"
  elif state_is halted; then
    echo "pipeline failed (exit $code): a person rejected a step and $RUN is halted: resume it (undolog session resume $RUN --as NAME --reason WHY) and re-run, or roll it back (undolog undo $RUN --yes)" >&2
  else
    echo "pipeline failed (exit $code): re-run it to retry; finished steps will be replayed" >&2
  fi
  exit "$code"
}
trap on_failure ERR

step "1. build"
undolog exec --session "$RUN" --tool build --undo "sh -c 'echo undo-build >> $W/journal; rm -f $W/app.tar'" -- \
  sh -c "echo build >> $W/journal; echo app-v2 > $W/app.tar"

step "2. migrate the database"
undolog exec --session "$RUN" --tool migrate --undo "sh -c 'echo undo-migrate >> $W/journal; rm -f $W/schema-v2'" -- \
  sh -c "echo migrate >> $W/journal; touch $W/schema-v2"

step "3. smoke test"
undolog exec --session "$RUN" --tier safe -- \
  sh -c "echo smoke >> $W/journal; test ! -e $W/break-smoke"

step "4. deploy (irreversible: waits for 'undolog approve')"
undolog exec --session "$RUN" --tool deploy --tier irreversible --approval-timeout 30m -- \
  sh -c "echo deploy >> $W/journal; cp $W/app.tar $W/live.tar"

undolog session complete "$RUN" >/dev/null
echo "pipeline $RUN done" >&2

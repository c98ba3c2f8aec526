#!/usr/bin/env bash
# A first run of undolog: one agent session through the effect log, against a
# throwaway log. Run it from the repository root: bash examples/quickstart.sh
set -euo pipefail

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/undolog" .
export PATH="$work:$PATH" UNDOLOG_LOG="$work/undolog.db" UNDOLOG_ACTOR="quickstart"
export UNDOLOG_HEADERS=1   # the tables keep their header row piped (| tee, a CI log): read, not parsed
bold='' plain=''
if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; fi   # no escapes into a pipe or a file
# say shows a command as it can be pasted (each argument quoted as the shell
# needs), then runs it.
say() {
  local shown='' a
  for a in "$@"; do
    if [[ $a =~ ^[A-Za-z0-9_./:=@%+-]+$ ]]; then shown+=" $a"; else shown+=" '${a//\'/\'\\\'\'}'"; fi
  done
  printf '\n%s$%s%s\n' "$bold" "$shown" "$plain"
  "$@"
}

say undolog session start agent-run-1 --meta agent=demo

# A compensable call: registered with its undo before it runs.
say undolog intercept --session agent-run-1 --tool write_file --tier compensable \
  --args "{\"path\":\"$work/report.txt\"}" --compensate-cmd "rm -f $work/report.txt"
echo "quarterly numbers" > "$work/report.txt"   # the call itself
say undolog start 1
say undolog commit 1 --result '{"bytes":18}'

# The agent repeats itself: the call is replayed from the log, nothing runs.
say undolog intercept --session agent-run-1 --tool write_file --tier compensable \
  --args "{\"path\":\"$work/report.txt\"}"

# An irreversible call waits for a person.
say undolog intercept --session agent-run-1 --tool send_email --tier irreversible \
  --args '{"to":"cfo@example.com","subject":"Q3"}' --reason 'send the report'
say undolog approvals
say undolog reject 3 --reason 'not before the audit'

# The session went wrong: undo it, last in first out.
say undolog undo agent-run-1 --dry-run
say undolog undo agent-run-1 --yes
test ! -e "$work/report.txt" && echo "report.txt was removed by its compensation"

say undolog session show agent-run-1
say undolog show 1
say undolog verify

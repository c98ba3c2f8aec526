#!/bin/sh
# screenshots.sh renders the screens of `undolog tui`, on the demo log, to
# PNG files in docs/ (docs/tui.md shows them). Run it by hand from the
# repository after changing the view; the tests do not. It needs tmux and
# freeze (go install github.com/charmbracelet/freeze@v0.2.2); pngquant, if
# there, makes the files a tenth of the size.
set -eu
cd "$(dirname "$0")/.."
command -v freeze >/dev/null || { echo "screenshots.sh: freeze not found: go install github.com/charmbracelet/freeze@v0.2.2" >&2; exit 1; }
dir=$(mktemp -d)
sock=undolog-shots-$$
trap 'tmux -L "$sock" kill-server 2>/dev/null || true; rm -rf "$dir"' EXIT
go build -o "$dir/undolog" .
"$dir/undolog" demo --log "$dir/demo.db" >/dev/null
UNDOLOG_ACTOR=alice tmux -L "$sock" -f /dev/null new-session -d -s shots -x 100 -y 30 \
	env -u NO_COLOR -u CI TERM=xterm-256color COLORTERM=truecolor UNDOLOG_LOG="$dir/demo.db" "$dir/undolog" tui
sleep 1

# keys sends each argument as a key, a moment apart.
keys() {
	for k in "$@"; do
		tmux -L "$sock" send-keys -t shots "$k"
		sleep 0.3
	done
}

# shot renders the pane as it is now to docs/tui-NAME.png. freeze takes
# tmux's "default colour" (39, 49) for no change: a reset says it.
shot() {
	sleep 0.7
	tmux -L "$sock" capture-pane -p -e -t shots | sed 's/\x1b\[39m/\x1b[0m/g; s/\x1b\[49m//g' >"$dir/$1.ansi"
	freeze --language ansi --window --padding 20 --font.size 10 --output "docs/tui-$1.png" "$dir/$1.ansi" >/dev/null
	if command -v pngquant >/dev/null; then
		pngquant --force --output "docs/tui-$1.png" 32 "docs/tui-$1.png"
	fi
	echo "docs/tui-$1.png"
}

keys j j j j; shot sessions       # agent-research-42: its detail under the list
keys u; shot undo; keys n         # the undo plan, to confirm
keys Enter j j j; shot session    # send_email, awaiting approval
keys a; shot approve; keys Escape # the decision dialog, over the dimmed view
keys / w r i t e _ f i l e; shot filter; keys Escape
keys '?'; shot help; keys Escape

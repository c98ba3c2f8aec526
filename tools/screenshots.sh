#!/bin/sh
# screenshots.sh renders the screens of `undolog tui`, on the demo log, to
# PNG files in docs/ (docs/tui.md shows them), each on a dark and on a light
# terminal: docs/tui-NAME-dark.png and docs/tui-NAME-light.png. Run it by
# hand from the repository after changing the view; the tests do not. It
# needs tmux and freeze (go install github.com/charmbracelet/freeze@v0.2.2);
# pngquant, if there, makes the files a tenth of the size.
#
# tmux answers the view's question about the background with the pane's
# window-style; its capture keeps reverse video and faint text (-e), which
# tools/shotcolors turns into the colours freeze draws.
set -eu
cd "$(dirname "$0")/.."
command -v freeze >/dev/null || { echo "screenshots.sh: freeze not found: go install github.com/charmbracelet/freeze@v0.2.2" >&2; exit 1; }
dir=$(mktemp -d)
sock=undolog-shots-$$
trap 'tmux -L "$sock" kill-server 2>/dev/null || true; rm -rf "$dir"' EXIT
go build -o "$dir/undolog" .
go build -o "$dir/shotcolors" ./tools/shotcolors

# keys sends each argument as a key, a moment apart.
keys() {
	for k in "$@"; do
		tmux -L "$sock" send-keys -t shots "$k"
		sleep 0.3
	done
}

# shot renders the pane as it is now to docs/tui-NAME-THEME.png.
shot() {
	sleep 0.7
	tmux -L "$sock" capture-pane -p -e -t shots | "$dir/shotcolors" -theme "$theme" >"$dir/$1.ansi"
	out="docs/tui-$1-$theme.png"
	freeze --language ansi --window --background "$bg" --padding 20 --font.size 10 --output "$out" "$dir/$1.ansi" >/dev/null
	if command -v pngquant >/dev/null; then
		pngquant --force --output "$out" 64 "$out"
	fi
	echo "$out"
}

# screens opens the view on a fresh demo log, on a terminal of $theme's
# colours, and takes each screen's picture.
screens() {
	rm -f "$dir/demo.db"
	"$dir/undolog" demo --log "$dir/demo.db" >/dev/null
	printf 'set -g window-style "fg=%s,bg=%s"\nset -g status off\n' "$fg" "$bg" >"$dir/tmux.conf"
	UNDOLOG_ACTOR=alice tmux -L "$sock" -f "$dir/tmux.conf" new-session -d -s shots -x 100 -y 30 \
		env -u NO_COLOR -u CI TERM=xterm-256color COLORTERM=truecolor TZ=UTC UNDOLOG_LOG="$dir/demo.db" "$dir/undolog" tui
	sleep 1
	keys j j j j; shot sessions           # agent-research-42: its detail under the list
	keys u; shot undo; keys n             # the undo plan, to confirm
	keys Enter j j j; shot session        # send_email, awaiting approval
	keys a; shot approve; keys Escape     # the decision dialog, over the dimmed view
	keys r; shot reject; keys Escape
	keys / w r i t e _ f i l e; shot filter; keys Escape
	keys '?'; shot help; keys Escape
	keys Escape k; keys Enter j Tab Down Down Down Down Down Down Down Down; shot history; keys Tab # ci-deploy-117's migrate: its history
	keys R; shot resolve; keys Escape     # its undo failed: resolve it by hand
	keys Escape k k k; keys u y; sleep 1; shot undone # ci-nightly-88 undone
	tmux -L "$sock" kill-server
}

theme=dark bg='#1c1c1c' fg='#d0d0d0' screens
theme=light bg='#ffffff' fg='#1f1f1f' screens

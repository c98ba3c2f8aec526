package agenthook

// Claude Code's own sandbox as the guard of undolog's files: its Bash runs
// in bubblewrap (Linux) or Seatbelt (macOS), which writes only the project
// and a temp dir, and never the paths the settings deny; its permission
// rules keep its Write and Edit out of the same paths. Without it, nothing
// but the policy (a guess at what a shell line writes) stands between the
// agent and the log file, its snapshots, its settings and `undolog approve`.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/undolog/undolog/filesnap"
	"github.com/undolog/undolog/internal/textfmt"
)

// Guarded are the paths the agent must not write (absolute): directories
// (the project's .claude, the log's directory for a log file, undolog's
// snapshot store) and files (a policy elsewhere).
type Guarded struct {
	Dirs, Files []string
}

// Paths are g's directories and files.
func (g Guarded) Paths() []string { return append(slices.Clip(g.Dirs), g.Files...) }

// covers says whether p is one of paths or inside one.
func covers(paths []string, p string) bool {
	for _, d := range paths {
		if d = filepath.Clean(d); d == p || inside(d, p) {
			return true
		}
	}
	return false
}

// editDenyAll keeps Write and Edit out of every .claude directory (the
// project's settings and policy, the user's settings).
const editDenyAll = "Edit(//**/.claude/**)"

// editDeny is the permission rule that keeps Claude Code's file tools
// (Edit's rules cover Write, MultiEdit and NotebookEdit) out of dir (a
// file's rule is its path alone).
func editDeny(dir string) string { return "Edit(/" + filepath.ToSlash(dir) + "/**)" }

// InstallSandbox turns Claude Code's sandbox on in the settings (bytes as
// Install takes them), with writes to g's paths denied to its Bash, and
// Write and Edit denied there by permission rules; sandbox false adds the
// permission rules alone. The user's keys are kept; a sandbox the settings
// turn off is refused, not turned on behind the user's back. It returns
// the settings to write and whether they changed.
func InstallSandbox(settings []byte, g Guarded, sandbox bool) ([]byte, bool, error) {
	top, err := parseObject(settings, "the settings")
	if err != nil {
		return nil, false, err
	}
	if sandbox {
		sb, err := subObject(top, "sandbox", "the settings' sandbox")
		if err != nil {
			return nil, false, err
		}
		if err := sandboxKeysOn(sb, "the settings'"); err != nil {
			return nil, false, err
		}
		for _, k := range sandboxOn {
			if _, ok := sb.vals[k.key]; !ok {
				sb.set(k.key, json.RawMessage(fmt.Sprint(k.want)))
			}
		}
		fsys, err := subObject(sb, "filesystem", "the settings' sandbox.filesystem")
		if err != nil {
			return nil, false, err
		}
		if err := addToList(fsys, "denyWrite", "the settings' sandbox.filesystem.denyWrite", g.Paths()); err != nil {
			return nil, false, err
		}
		sb.set("filesystem", fsys.marshal())
		top.set("sandbox", sb.marshal())
	}
	perms, err := subObject(top, "permissions", "the settings' permissions")
	if err != nil {
		return nil, false, err
	}
	if err := addToList(perms, "deny", "the settings' permissions.deny", denyRules(g)); err != nil {
		return nil, false, err
	}
	top.set("permissions", perms.marshal())
	return indented(settings, top)
}

// sandboxOn are the sandbox's keys undolog needs, with their values.
var sandboxOn = []struct {
	key  string
	want bool
}{{"enabled", true}, {"failIfUnavailable", true}, {"allowUnsandboxedCommands", false}}

// sandboxKeysOn refuses a sandbox object (of the settings whose is says)
// that sets one of sandboxOn's keys otherwise.
func sandboxKeysOn(sb *object, whose string) error {
	for _, k := range sandboxOn {
		if raw, ok := sb.vals[k.key]; ok {
			var v bool
			if json.Unmarshal(raw, &v) != nil || v != k.want {
				return fmt.Errorf("%s sandbox.%s is %s, and undolog needs it %v: change it, or run init with --no-sandbox", whose, k.key, raw, k.want)
			}
		}
	}
	return nil
}

// CheckLocalSandbox refuses local settings (settings.local.json, whose
// keys win over settings.json's in Claude Code) that turn the sandbox off.
func CheckLocalSandbox(local []byte) error {
	top, err := parseObject(local, "the local settings")
	if err != nil {
		return err
	}
	sb, err := subObject(top, "sandbox", "the local settings' sandbox")
	if err != nil {
		return err
	}
	return sandboxKeysOn(sb, "the local settings'")
}

// subObject is the object top holds under key (a new one if none).
func subObject(top *object, key, what string) (*object, error) {
	raw, ok := top.vals[key]
	if !ok {
		return &object{vals: map[string]json.RawMessage{}}, nil
	}
	return parseObject(raw, what)
}

// addToList appends to o's list of strings under key the items it lacks.
func addToList(o *object, key, what string, items []string) error {
	var list []json.RawMessage
	var have []string
	if raw, ok := o.vals[key]; ok {
		if err := json.Unmarshal(raw, &list); err != nil {
			return fmt.Errorf("%s is not a list: %v", what, err)
		}
		for _, r := range list {
			var s string
			if json.Unmarshal(r, &s) == nil {
				have = append(have, s)
			}
		}
	}
	for _, it := range items {
		if slices.Contains(have, it) {
			continue
		}
		have = append(have, it)
		b, err := marshal(it)
		if err != nil {
			return err
		}
		list = append(list, b)
	}
	if list == nil {
		list = []json.RawMessage{}
	}
	b, err := marshal(list)
	if err != nil {
		return err
	}
	o.set(key, b)
	return nil
}

// SandboxOff says why the project's settings leave Claude Code's Bash
// unsandboxed, or able to write undolog's files (logFile's directory, empty
// for a log that is no file, the snapshot store, .claude: GuardedFor), or
// "" when they sandbox it as `undolog init claude-code` does:
// sandbox.enabled and failIfUnavailable true (a machine without bubblewrap
// otherwise runs Bash bare, with a warning), allowUnsandboxedCommands false
// (the model otherwise runs a command outside by asking), those paths in
// sandbox.filesystem.denyWrite. .claude/settings.local.json's keys win over
// .claude/settings.json's and the lists of both count, as in Claude Code;
// managed settings and the command line's are not read.
func SandboxOff(project, logFile, policyFile string) string {
	var sandbox struct {
		Enabled                  *bool `json:"enabled"`
		FailIfUnavailable        *bool `json:"failIfUnavailable"`
		AllowUnsandboxedCommands *bool `json:"allowUnsandboxedCommands"`
	}
	var denied []string
	for _, name := range []string{"settings.json", "settings.local.json"} {
		path := filepath.Join(project, ".claude", name)
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		var s struct {
			Sandbox json.RawMessage `json:"sandbox"`
		}
		var lists struct {
			Filesystem struct {
				DenyWrite []string `json:"denyWrite"`
			} `json:"filesystem"`
		}
		if err == nil {
			err = json.Unmarshal(b, &s)
		}
		if err == nil && s.Sandbox != nil {
			// A later file's keys replace an earlier one's, one by one.
			err = json.Unmarshal(s.Sandbox, &sandbox)
		}
		if err == nil && s.Sandbox != nil {
			err = json.Unmarshal(s.Sandbox, &lists)
		}
		if err != nil {
			return fmt.Sprintf("%s cannot be read (%v)", path, err)
		}
		denied = append(denied, lists.Filesystem.DenyWrite...)
	}
	const turnOn = "; `undolog init claude-code` turns it on"
	switch {
	case sandbox.Enabled == nil || !*sandbox.Enabled:
		return "Claude Code's sandbox is off in the project's settings" + turnOn
	case sandbox.FailIfUnavailable == nil || !*sandbox.FailIfUnavailable:
		return "the project's settings let Claude Code run Bash unsandboxed where its sandbox is unavailable (sandbox.failIfUnavailable)" + turnOn
	case sandbox.AllowUnsandboxedCommands == nil || *sandbox.AllowUnsandboxedCommands:
		return "the project's settings let the model run a command outside Claude Code's sandbox (sandbox.allowUnsandboxedCommands)" + turnOn
	}
	g, err := GuardedFor(project, logFile, policyFile)
	if err != nil {
		return err.Error()
	}
	logDir := ""
	if logFile != "" {
		logFile, _ = filepath.Abs(logFile)
		logDir, _ = realAbs(filepath.Dir(logFile))
	}
	for _, p := range g.Paths() {
		switch {
		case covers(denied, p):
		case p == logDir:
			// Most often init was run with another log than this hook's.
			return fmt.Sprintf("the project's settings let Claude Code's sandbox write %s, the directory of this hook's log %s (not in sandbox.filesystem.denyWrite): run `undolog init claude-code --log %s` in the project",
				p, logFile, textfmt.ShellQuote(logFile))
		default:
			return fmt.Sprintf("the project's settings let Claude Code's sandbox write %s (not in sandbox.filesystem.denyWrite)%s", p, turnOn)
		}
	}
	return ""
}

// GuardedFor are the paths to keep the agent of project from: its
// .claude, the directory of logFile (empty: the log is no file), the root
// of undolog's snapshot stores, and policyFile (empty: none) unless one of
// those holds it. A log, store or policy inside the project (but in
// .claude) is refused (the agent writes there), and so is a log or store
// directory that holds the project (denying it would deny the project).
func GuardedFor(project, logFile, policyFile string) (Guarded, error) {
	project, err := realAbs(project)
	if err != nil {
		return Guarded{}, err
	}
	g := Guarded{Dirs: []string{filepath.Join(project, ".claude")}}
	dirs := []struct{ dir, what, move string }{
		{filepath.Dir(filesnap.StoreDir(project)), "undolog's snapshot store", "$UNDOLOG_FILES_DIR"},
	}
	if logFile != "" {
		dirs = append([]struct{ dir, what, move string }{{filepath.Dir(logFile), "the log's directory", "--log or $UNDOLOG_LOG"}}, dirs...)
	}
	for _, d := range dirs {
		dir, err := realAbs(d.dir)
		if err != nil {
			return Guarded{}, err
		}
		switch {
		case dir == project || inside(project, dir):
			return Guarded{}, fmt.Errorf("%s %s is inside the project, where the agent's shell writes: move it out (%s)", d.what, dir, d.move)
		case inside(dir, project):
			return Guarded{}, fmt.Errorf("%s %s holds the project: keeping the agent from it would keep it from the project too; give it a directory of its own (%s)", d.what, dir, d.move)
		case sharedByAll(dir):
			// Claude Code's sandbox keeps its own temp dir below /tmp: denying
			// /tmp would deny it that.
			return Guarded{}, fmt.Errorf("%s %s is shared by every user (world-writable, sticky), as the sandbox's own temp dir below it is: keeping the agent from it would break the sandbox; put it in a directory of its own (%s)", d.what, dir, d.move)
		}
		if !slices.Contains(g.Dirs, dir) {
			g.Dirs = append(g.Dirs, dir)
		}
	}
	if policyFile != "" {
		policy, err := realAbs(policyFile)
		if err != nil {
			return Guarded{}, err
		}
		switch {
		case covers(g.Dirs, policy):
		case inside(project, policy):
			// A file denied alone is kept, but not the directories above it:
			// the agent's shell could move one away and put another policy there.
			return Guarded{}, fmt.Errorf("the policy %s is inside the project, where the agent's shell writes: keep it in .claude/ or outside the project", policy)
		default:
			g.Files = append(g.Files, policy)
		}
	}
	return g, nil
}

// sharedByAll says whether dir is a world-writable sticky directory, as
// /tmp is.
func sharedByAll(dir string) bool {
	info, err := os.Stat(dir)
	return err == nil && info.IsDir() && info.Mode()&os.ModeSticky != 0 && info.Mode().Perm()&0o002 != 0
}

// realAbs is path absolute, its existing part's links resolved (the
// sandbox binds what they point to).
func realAbs(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	rest := ""
	for dir := abs; ; dir = filepath.Dir(dir) {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(real, rest), nil
		}
		if filepath.Dir(dir) == dir {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(dir), rest)
	}
}

// UserSettings is Claude Code's user settings file: settings.json in
// $CLAUDE_CONFIG_DIR, else in ~/.claude.
func UserSettings(getenv func(string) string) string {
	if dir := getenv("CLAUDE_CONFIG_DIR"); dir != "" {
		return filepath.Join(dir, "settings.json")
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, ".claude", "settings.json")
}

// ProjectSettings are the project's settings files, as Claude Code reads
// them.
func ProjectSettings(project string) []string {
	return []string{filepath.Join(project, ".claude", "settings.json"), filepath.Join(project, ".claude", "settings.local.json")}
}

// Excluding is the first of the settings files whose
// sandbox.excludedCommands is not empty, and that list as it is written:
// Claude Code runs those commands outside its sandbox even with
// allowUnsandboxedCommands false, and make, say, runs whatever the agent
// wrote in a Makefile (undolog approve too). A file that is missing is
// passed by; one that cannot be read or parsed is err.
func Excluding(files []string) (file, commands string, err error) {
	for _, path := range files {
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		var s struct {
			Sandbox struct {
				ExcludedCommands json.RawMessage `json:"excludedCommands"`
			} `json:"sandbox"`
		}
		if err == nil {
			err = json.Unmarshal(b, &s)
		}
		if err != nil {
			return path, "", err
		}
		var list []any
		if raw := s.Sandbox.ExcludedCommands; raw != nil && string(raw) != "null" && (json.Unmarshal(raw, &list) != nil || len(list) > 0) {
			return path, textfmt.EscapeCut(string(raw), 200), nil
		}
	}
	return "", "", nil
}

// ExcludedCommands says why the settings files let a command run outside
// Claude Code's sandbox (Excluding), or "" when none does; a file that
// cannot be read counts as one that does.
func ExcludedCommands(files []string) string {
	file, commands, err := Excluding(files)
	switch {
	case err != nil:
		return fmt.Sprintf("%s cannot be read (%v)", file, err)
	case file != "":
		return fmt.Sprintf("%s's sandbox.excludedCommands %s runs those commands outside Claude Code's sandbox, whatever allowUnsandboxedCommands says: remove it", file, commands)
	}
	return ""
}

// denyRules are the permission rules that keep Claude Code's file tools
// out of g's paths and every .claude.
func denyRules(g Guarded) []string {
	rules := []string{editDenyAll}
	for _, d := range g.Dirs {
		rules = append(rules, editDeny(d))
	}
	for _, f := range g.Files {
		rules = append(rules, "Edit(/"+filepath.ToSlash(f)+")")
	}
	return rules
}

// PermissionsOff says which of the permission rules `undolog init
// claude-code` writes (denyRules of GuardedFor) the project's settings
// lack, the lists of .claude/settings.json and settings.local.json
// together, or "" when they have them all: without them Claude Code's
// Write and Edit reach the log, its snapshots and the settings, and no
// sandbox covers the file tools.
func PermissionsOff(project, logFile, policyFile string) string {
	var denied []string
	for _, path := range ProjectSettings(project) {
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		var s struct {
			Permissions struct {
				Deny []string `json:"deny"`
			} `json:"permissions"`
		}
		if err == nil {
			err = json.Unmarshal(b, &s)
		}
		if err != nil {
			return fmt.Sprintf("%s cannot be read (%v)", path, err)
		}
		denied = append(denied, s.Permissions.Deny...)
	}
	g, err := GuardedFor(project, logFile, policyFile)
	if err != nil {
		return err.Error()
	}
	for _, rule := range denyRules(g) {
		if !slices.Contains(denied, rule) {
			return fmt.Sprintf("the project's settings let Claude Code's Write and Edit write undolog's files (permissions.deny lacks %s)", rule)
		}
	}
	return ""
}

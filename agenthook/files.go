package agenthook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/undolog/undolog/filesnap"
	"github.com/undolog/undolog/model"
)

// ErrFilesBusy is a call refused because another call of the project that
// changes its files is between its PreToolUse and PostToolUse: a shell
// command's snapshot would record the other call's changes as its own.
var ErrFilesBusy = errors.New("another call changing this project's files is running")

// ProjectFiles is Files over package filesnap. A Write, Edit or
// NotebookEdit captures its file; a shell command (no paths) the whole
// project. A shell command's window (Before to After) must not overlap
// another call's of the same project, or each would record the other's
// changes: every call in its window holds a marker naming its agent in
// the store's calls directory, and a call that would overlap a shell
// command's window (or a shell command that would overlap any) is
// refused, to be made again once the other has ended. The hooks are
// separate processes, so no lock can be held from one to the other. A
// marker is stale, and removed, when its agent is gone (its call is in
// doubt), or when the PreToolUse hook that wrote it has ended and the log
// holds no executing call with its snapshot: the call never began, or its
// PostToolUse never came and it was ended otherwise (undolog fail, commit,
// resolve), so that a lost PostToolUse does not hold the project's shell
// commands for the agent's life.
type ProjectFiles struct {
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// Executing tells whether the log holds a call that is executing with
	// the snapshot as its undo; nil: a marker is kept while its agent
	// lives.
	Executing func(snapshot string) (bool, error)
}

// marker is a call in its window: its agent, and the PreToolUse hook
// that captured it (the call is being recorded while it runs).
type marker struct {
	Shell bool         `json:"shell"`
	Agent *model.Owner `json:"agent"`
	Hook  *model.Owner `json:"hook,omitempty"`
}

func (p ProjectFiles) now() time.Time {
	if p.Now == nil {
		return time.Now()
	}
	return p.Now()
}

// Before captures paths of project (none: all of it) once no overlapping
// call runs, and gives the call's undo: undolog files restore.
func (p ProjectFiles) Before(project string, paths []string) (*model.Compensation, error) {
	if paths != nil {
		project = namedFilesProject(project, paths)
	}
	calls := callsDir(project)
	if err := os.MkdirAll(calls, 0o700); err != nil {
		return nil, err
	}
	own, err := os.CreateTemp(calls, "pre-*")
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(marker{Shell: paths == nil, Agent: model.OwnerOf(agentPID(), p.now()), Hook: model.OwnerOf(os.Getpid(), p.now())})
	_, err = own.Write(b)
	if cerr := own.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// Written first, read second: of two calls that start together, each
		// sees the other's marker, and neither runs beside the other.
		err = p.overlapping(calls, filepath.Base(own.Name()), paths == nil)
	}
	if err != nil {
		os.Remove(own.Name())
		return nil, err
	}
	id, err := filesnap.Before(project, paths)
	if err != nil {
		os.Remove(own.Name())
		return nil, err
	}
	if err := os.Rename(own.Name(), filepath.Join(calls, id)); err != nil {
		os.Remove(own.Name())
		return nil, err
	}
	c := filesnap.Compensation(project, id)
	return &c, nil
}

// After records what the call left, ends its window, and says whether
// the call changed any file.
func (p ProjectFiles) After(_ string, undo *model.Compensation) (bool, error) {
	_, id, ok := filesnap.ParseRestore(*undo)
	if !ok {
		return false, fmt.Errorf("%w: the compensation %v is not a files restore", model.ErrInvalidInput, undo.Argv)
	}
	defer os.Remove(filepath.Join(callsDir(undo.Dir), id))
	s, err := filesnap.Open(undo.Dir)
	if err != nil {
		return false, err
	}
	if err := s.After(id); err != nil {
		return false, err
	}
	changes, err := s.Changes(id)
	return len(changes) > 0, err
}

// Abandon ends the window of a call that did not run, or whose end is not
// known. Its after-state is not recorded: what an interrupted call changed
// cannot be told from what others changed since, so its restore refuses
// and undo stops at it for a person.
func (p ProjectFiles) Abandon(undo *model.Compensation) {
	if _, id, ok := filesnap.ParseRestore(*undo); ok {
		os.Remove(filepath.Join(callsDir(undo.Dir), id))
	}
}

// callsDir holds the markers of project's calls in their window.
func callsDir(project string) string { return filepath.Join(filesnap.StoreDir(project), "calls") }

// overlapping is ErrFilesBusy if a call other than own is in its window
// and one of the two is a shell command. Stale markers are removed.
func (p ProjectFiles) overlapping(calls, own string, shell bool) error {
	entries, err := os.ReadDir(calls)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == own {
			continue
		}
		path := filepath.Join(calls, e.Name())
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // its call ended meanwhile
		}
		if err != nil {
			return err
		}
		var m marker
		if json.Unmarshal(b, &m) != nil || m.Agent == nil {
			// Being written (a marker is created empty) or damaged: only
			// an old one is taken as stale.
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > ToolLease {
				os.Remove(path)
				continue
			}
			return fmt.Errorf("%w (its marker %s is unreadable)", ErrFilesBusy, path)
		}
		switch m.Agent.Liveness() {
		case model.OwnerDead, model.OwnerLapsed, model.OwnerNone:
			os.Remove(path)
			continue
		}
		if !shell && !m.Shell {
			continue
		}
		if stale, err := p.ended(e.Name(), m); err != nil {
			return fmt.Errorf("%w (whether its call still runs could not be read: %v)", ErrFilesBusy, err)
		} else if stale {
			os.Remove(path)
			continue
		}
		if shell || m.Shell {
			return fmt.Errorf("%w (a %s of agent pid %d)", ErrFilesBusy, callKind(m.Shell), m.Agent.PID)
		}
	}
	return nil
}

// ended tells whether the call of the marker named name has ended while
// its agent lives: its PreToolUse hook is over, and the log holds no
// executing call with its snapshot (the name, once captured).
func (p ProjectFiles) ended(name string, m marker) (bool, error) {
	if p.Executing == nil {
		return false, nil
	}
	if m.Hook != nil && m.Hook.Liveness() == model.OwnerAlive {
		return false, nil
	}
	if strings.HasPrefix(name, "pre-") {
		// Its hook ended before it captured anything (one that names no
		// hook was written by an older undolog: its agent decides).
		return m.Hook != nil, nil
	}
	running, err := p.Executing(name)
	return !running, err
}

func callKind(shell bool) string {
	if shell {
		return "shell command"
	}
	return "file edit"
}

// namedFilesProject is the directory whose store captures paths: the
// project if they are all inside it, else the nearest existing directory
// holding them all (a Write outside the project is undone too).
func namedFilesProject(project string, paths []string) string {
	dir := project
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			continue
		}
		for !inside(dir, p) && dir != filepath.Dir(dir) {
			dir = filepath.Dir(dir)
		}
	}
	for dir != filepath.Dir(dir) {
		if info, err := os.Stat(dir); err == nil && info.IsDir() {
			break
		}
		dir = filepath.Dir(dir)
	}
	return dir
}

// inside reports whether p is strictly inside dir.
func inside(dir, p string) bool {
	rel, err := filepath.Rel(dir, filepath.Clean(p))
	return err == nil && rel != "." && rel != ".." && !filepath.IsAbs(rel) && (len(rel) < 3 || rel[:3] != ".."+string(filepath.Separator))
}

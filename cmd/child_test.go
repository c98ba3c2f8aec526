package cmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/undolog/undolog/internal/testbin"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
)

// A SIGKILLed undolog takes the command it runs with it (Linux), so that a
// later --retry-in-doubt never runs it beside the first: exec's command and
// undo's compensation command alike.
func TestCommandDiesWithUndolog(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux's")
	}
	script := func(marks string) string {
		return "echo start >> " + marks + "; sleep 2; echo end >> " + marks
	}
	for name, args := range map[string]func(t *testing.T, db, marks string) []string{
		"exec": func(t *testing.T, db, marks string) []string {
			return []string{"exec", "--session", "s", "--undo", "true", "--", "sh", "-c", script(marks)}
		},
		"undo": func(t *testing.T, db, marks string) []string {
			committedEffect(t, logaddr.File(db, logaddr.Options{}), &model.Compensation{Kind: model.CompensationCommand,
				Argv: []string{"sh", "-c", script(marks)}})
			return []string{"undo", "s", "--yes"}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			db, marks := filepath.Join(dir, "u.db"), filepath.Join(dir, "marks")
			cmd := exec.Command(testbin.Undolog(t), args(t, db, marks)...)
			cmd.Env = append(os.Environ(), "UNDOLOG_LOG="+db, "UNDOLOG_ACTOR=tester")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Wait()
			deadline := time.Now().Add(10 * time.Second)
			for data, _ := os.ReadFile(marks); !strings.Contains(string(data), "start"); data, _ = os.ReadFile(marks) {
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatal("the command did not start in 10s")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			time.Sleep(3 * time.Second)
			if data, _ := os.ReadFile(marks); strings.Contains(string(data), "end") {
				t.Fatalf("the command went on after undolog was killed: %q", data)
			}
		})
	}
}

package boltfile

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage"
)

// expectRefused checks that every operation on the file fails with want and
// leaves the file byte for byte as it was.
func expectRefused(t *testing.T, path string, want error, mention string) {
	t.Helper()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := newTestLog(path, testOptions{})
	t.Cleanup(func() { s.pause() })
	ops := map[string]func() error{
		"intercept": func() error {
			_, err := s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "t", Tier: sm.Compensable, CreateSession: true})
			return err
		},
		"list":    func() error { _, _, err := s.ListEffects(t.Context(), effectlog.EffectFilter{}); return err },
		"verify":  func() error { _, err := s.Verify(t.Context()); return err },
		"session": func() error { _, err := s.CreateSession(t.Context(), effectlog.NewSession{ID: "x"}); return err },
	}
	for name, op := range ops {
		err := op()
		if !errors.Is(err, want) {
			t.Errorf("%s: got %v, want %v", name, err, want)
			continue
		}
		if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), mention) {
			t.Errorf("%s: message %q should be one line naming %s and %q", name, err, path, mention)
		}
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatalf("the file was modified")
	}
}

func TestDamagedFilesAreRefusedAndKept(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Run("text file", func(t *testing.T) {
		expectRefused(t, write("notes.db", bytes.Repeat([]byte("hello world\n"), 2000)), model.ErrCorrupt, "not a bbolt file")
	})
	t.Run("empty file", func(t *testing.T) {
		expectRefused(t, write("empty.db", nil), model.ErrCorrupt, "empty")
	})
	t.Run("truncated log", func(t *testing.T) {
		s := newTestLog(filepath.Join(dir, "full.db"), testOptions{})
		t.Cleanup(func() { s.pause() })
		for i := 0; i < 300; i++ {
			if _, err := s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "t", Tier: sm.Compensable, CreateSession: true,
				Args: json.RawMessage(`{"i":` + strings.Repeat("1", 1+i%10) + `,"pad":"` + strings.Repeat("x", 200) + `"}`)}); err != nil && !errors.Is(err, model.ErrInvalidInput) {
				t.Fatal(err)
			}
		}
		// Cut into the pages in use (the file may also hold unused room at its end).
		db, err := bolt.Open(s.Path(), 0o600, &bolt.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		var used int64
		db.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil })
		db.Close()
		data, _ := os.ReadFile(s.Path())
		expectRefused(t, write("truncated.db", data[:used-3*4096]), model.ErrCorrupt, "truncated")
	})
	t.Run("foreign bbolt file", func(t *testing.T) {
		p := filepath.Join(dir, "foreign.db")
		db, err := bolt.Open(p, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("other")); return err })
		db.Close()
		expectRefused(t, p, model.ErrCorrupt, "without undolog's records")
	})
	t.Run("newer schema", func(t *testing.T) {
		s := newTestLog(filepath.Join(dir, "newer.db"), testOptions{})
		t.Cleanup(func() { s.pause() })
		if _, err := s.CreateSession(t.Context(), effectlog.NewSession{ID: "a"}); err != nil {
			t.Fatal(err)
		}
		db, err := bolt.Open(s.Path(), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bMeta).Put(keySchema, itob(SchemaVersion+1)) })
		db.Close()
		expectRefused(t, s.Path(), model.ErrNewerSchema, "upgrade undolog")
	})
	t.Run("meta page pointing at the wrong pages", func(t *testing.T) {
		// As a buggy writer would leave it: fields wrong, checksum right.
		seed, err := seedLog()
		if err != nil {
			t.Fatal(err)
		}
		le := binary.LittleEndian
		var root, freelist uint64
		withMeta(seed, func(m []byte) { root, freelist = le.Uint64(m[metaRoot:]), le.Uint64(m[metaFreelist:]) })
		edit := func(name string, field int, value uint64) string {
			return write(name, withMeta(seed, func(m []byte) { le.PutUint64(m[field:], value) }))
		}
		expectRefused(t, edit("freelist-at-root.db", metaFreelist, root), model.ErrCorrupt, "damaged freelist page")
		expectRefused(t, edit("root-at-freelist.db", metaRoot, freelist), model.ErrCorrupt, "damaged root page")
		expectRefused(t, edit("root-past-end.db", metaRoot, 1<<40), model.ErrCorrupt, "outside the file's pages")
	})
	t.Run("directory", func(t *testing.T) {
		p := filepath.Join(dir, "adir")
		os.Mkdir(p, 0o700)
		if _, _, err := newTestLog(p, testOptions{}).ListEffects(t.Context(), effectlog.EffectFilter{}); !errors.Is(err, model.ErrCorrupt) {
			t.Fatalf("%v", err)
		}
	})
}

// tamper edits the log behind the store's back.
func tamper(t *testing.T, s *testLog, fn func(tx *bolt.Tx) error) {
	t.Helper()
	if err := s.checkpoint(); err != nil { // bbolt must hold every write first
		t.Fatal(err)
	}
	db, err := bolt.Open(s.Path(), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

func seeded(t *testing.T) (*testLog, uint64) {
	s, _ := newStore(t)
	id := intercept(t, s, "s", "write", sm.Compensable, `{"a":1}`).Effect.ID
	must[model.Effect](t)(s.Start(t.Context(), id, model.Change{}))
	must[model.Effect](t)(s.Commit(t.Context(), id, model.Change{Result: json.RawMessage(`1`)}))
	intercept(t, s, "s", "pay", sm.Irreversible, `{"b":2}`)
	verifyClean(t, s)
	return s, id
}

func expectProblem(t *testing.T, s *testLog, kind, detail string) {
	t.Helper()
	rep := must[effectlog.VerifyReport](t)(s.Verify(t.Context()))
	for _, p := range rep.Problems {
		if p.Kind == kind && strings.Contains(p.Detail, detail) {
			return
		}
	}
	t.Fatalf("verify did not report %s %q; got %v", kind, detail, rep.Problems)
}

func TestVerifyDetectsTampering(t *testing.T) {
	t.Run("edited history record", func(t *testing.T) {
		s, id := seeded(t)
		tamper(t, s, func(tx *bolt.Tx) error {
			var r model.HistoryRecord
			getRecord(plainTx(tx).Bucket(bHistory), historyKey(id, 2), &r)
			r.Actor = "mallory"
			return putRecord(&writeTx{Tx: tx}, bHistory, historyKey(id, 2), &r)
		})
		expectProblem(t, s, "history", "altered")
	})
	t.Run("deleted history record", func(t *testing.T) {
		s, id := seeded(t)
		tamper(t, s, func(tx *bolt.Tx) error { return tx.Bucket(bHistory).Delete(historyKey(id, 2)) })
		expectProblem(t, s, "history", "missing")
	})
	t.Run("deleted newest record", func(t *testing.T) {
		s, id := seeded(t)
		tamper(t, s, func(tx *bolt.Tx) error { return tx.Bucket(bHistory).Delete(historyKey(id, 3)) })
		expectProblem(t, s, "history", "pins 3")
	})
	t.Run("dangling index entry", func(t *testing.T) {
		s, _ := seeded(t)
		tamper(t, s, func(tx *bolt.Tx) error { return tx.Bucket(bByTool).Put(nameKey("write", 77), nil) })
		expectProblem(t, s, "index", "dangling")
	})
	t.Run("missing index entry", func(t *testing.T) {
		s, id := seeded(t)
		tamper(t, s, func(tx *bolt.Tx) error { return tx.Bucket(bByState).Delete(nameKey("committed", id)) })
		expectProblem(t, s, "index", "state index lacks")
	})
	t.Run("state disagrees with history", func(t *testing.T) {
		s, id := seeded(t)
		tamper(t, s, func(tx *bolt.Tx) error {
			var e model.Effect
			getRecord(plainTx(tx).Bucket(bEffects), itob(id), &e)
			e.State = sm.Executing
			return putRecord(&writeTx{Tx: tx}, bEffects, itob(id), &e)
		})
		expectProblem(t, s, "state", "last history record")
	})
	t.Run("duplicate signature owner", func(t *testing.T) {
		s, id := seeded(t)
		tamper(t, s, func(tx *bolt.Tx) error {
			var e model.Effect
			getRecord(plainTx(tx).Bucket(bEffects), itob(id+1), &e)
			var owner model.Effect
			getRecord(plainTx(tx).Bucket(bEffects), itob(id), &owner)
			e.CallSignature = owner.CallSignature
			return putRecord(&writeTx{Tx: tx}, bEffects, itob(id+1), &e)
		})
		expectProblem(t, s, "signature", "also owned")
	})
	t.Run("pending index entry with another expiry", func(t *testing.T) {
		s, id := seeded(t) // id+1 is an irreversible call waiting for approval
		later := time.Now().Add(time.Hour)
		tamper(t, s, func(tx *bolt.Tx) error {
			return tx.Bucket(bApprovalsOpen).Put(itob(id+1), pendingValue("s", &later))
		})
		expectProblem(t, s, "index", "pending index entry expires")
	})
	// What an effect says is covered by its history: a byte changed in its
	// args, result, error or compensation (or in its undo entry's, or in its
	// approval request's args) is found, and so is a signature its args do
	// not give.
	editEffect := func(t *testing.T, s *testLog, id uint64, edit func(e *model.Effect)) {
		t.Helper()
		tamper(t, s, func(tx *bolt.Tx) error {
			var e model.Effect
			if _, err := getRecord(plainTx(tx).Bucket(bEffects), itob(id), &e); err != nil {
				return err
			}
			edit(&e)
			return putRecord(&writeTx{Tx: tx}, bEffects, itob(id), &e)
		})
	}
	t.Run("flipped byte in args", func(t *testing.T) {
		s, id := seeded(t)
		editEffect(t, s, id, func(e *model.Effect) { e.Args = json.RawMessage(`{"a":3}`) })
		expectProblem(t, s, "history", "altered")
		expectProblem(t, s, "signature", "does not match its args")
	})
	t.Run("flipped byte in result", func(t *testing.T) {
		s, id := seeded(t)
		editEffect(t, s, id, func(e *model.Effect) { e.Result = json.RawMessage(`3`) })
		expectProblem(t, s, "history", "altered")
	})
	t.Run("flipped byte in error", func(t *testing.T) {
		s, _ := seeded(t)
		id := intercept(t, s, "s", "flaky", sm.Compensable, `{}`).Effect.ID
		must[model.Effect](t)(s.Start(t.Context(), id, model.Change{}))
		must[model.Effect](t)(s.Fail(t.Context(), id, model.Change{Error: "disk full"}))
		verifyClean(t, s)
		editEffect(t, s, id, func(e *model.Effect) { e.Error = "disk fulL" })
		expectProblem(t, s, "history", "altered")
	})
	t.Run("flipped byte in compensation argv", func(t *testing.T) {
		s, id := seededWithCommand(t)
		editEffect(t, s, id, func(e *model.Effect) { e.Compensation.Argv[1] = "/etc" })
		expectProblem(t, s, "history", "altered")
	})
	t.Run("undo entry with another compensation", func(t *testing.T) {
		s, id := seededWithCommand(t)
		tamper(t, s, func(tx *bolt.Tx) error {
			// An undo entry that holds its own compensation, as JSON entries
			// of older logs do.
			u, err := getUndoOf(plainTx(tx), "c", id)
			if err != nil || u == nil {
				return fmt.Errorf("undo entry: %v", err)
			}
			u.Compensation.Argv = []string{"rm", "-rf", "/etc"}
			data, err := json.Marshal(u)
			if err != nil {
				return err
			}
			return tx.Bucket(bUndo).Put(nameKey("c", id), data)
		})
		expectProblem(t, s, "undo", "compensation differs from the effect's")
	})
	t.Run("flipped byte in approval args", func(t *testing.T) {
		s, id := seeded(t) // id+1 waits for approval
		tamper(t, s, func(tx *bolt.Tx) error {
			a, err := getApproval(plainTx(tx), id+1)
			if err != nil || a == nil {
				return fmt.Errorf("approval: %v", err)
			}
			a.Args = json.RawMessage(`{"b":3}`)
			return putRecord(&writeTx{Tx: tx}, bApprovals, itob(id+1), a)
		})
		expectProblem(t, s, "approval", "differ from the effect's")
	})
	t.Run("flipped byte in approval reason", func(t *testing.T) {
		s, _ := newStore(t)
		id := must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "pay", Tier: sm.Irreversible,
			Args: json.RawMessage(`{"b":2}`), CreateSession: true, Reason: "refund order 17"})).Effect.ID
		verifyClean(t, s)
		tamper(t, s, func(tx *bolt.Tx) error {
			a, err := getApproval(plainTx(tx), id)
			if err != nil || a == nil {
				return fmt.Errorf("approval: %v", err)
			}
			a.Reason = "refund order 71"
			return putRecord(&writeTx{Tx: tx}, bApprovals, itob(id), a)
		})
		expectProblem(t, s, "approval", "reason differs from the effect's history")
	})
	// What a session says (its meta, its upstream MCP server command) is
	// covered by its history too, and so is the state of an undo entry.
	editSession := func(t *testing.T, s *testLog, id string, edit func(sess *model.Session)) {
		t.Helper()
		tamper(t, s, func(tx *bolt.Tx) error {
			sess, err := getSession(plainTx(tx), id)
			if err != nil {
				return err
			}
			edit(&sess)
			return putSession(&writeTx{Tx: tx}, &sess)
		})
	}
	proxied := func(t *testing.T) *testLog {
		s, _ := newStore(t)
		must[model.Session](t)(s.CreateSession(t.Context(), effectlog.NewSession{ID: "p", Upstream: []string{"mcp-server", "--root=/srv"}, Meta: map[string]string{"via": "proxy"}}))
		verifyClean(t, s)
		return s
	}
	t.Run("flipped byte in session upstream", func(t *testing.T) {
		s := proxied(t)
		editSession(t, s, "p", func(sess *model.Session) { sess.Upstream[1] = "--root=/etc" })
		expectProblem(t, s, "history", "upstream was altered")
		if _, err := s.VerifySession(t.Context(), "p"); !errors.Is(err, model.ErrCorrupt) || !strings.Contains(err.Error(), "damaged or tampered") {
			t.Fatalf("VerifySession of a changed upstream: %v", err)
		}
	})
	t.Run("flipped byte in an upstream set later", func(t *testing.T) {
		s, _ := newStore(t)
		must[model.Session](t)(s.CreateSession(t.Context(), effectlog.NewSession{ID: "p"}))
		must[model.Session](t)(s.SetUpstream(t.Context(), "p", []string{"mcp-server", "--root=/srv"}))
		verifyClean(t, s)
		editSession(t, s, "p", func(sess *model.Session) { sess.Upstream[1] = "--root=/etc" })
		expectProblem(t, s, "history", "upstream was altered")
	})
	t.Run("flipped byte in session meta", func(t *testing.T) {
		s := proxied(t)
		editSession(t, s, "p", func(sess *model.Session) { sess.Meta["via"] = "proxz" })
		expectProblem(t, s, "history", "what the session says")
	})
	t.Run("session state disagrees with history", func(t *testing.T) {
		s := proxied(t)
		editSession(t, s, "p", func(sess *model.Session) { sess.State = sm.SessionFailed })
		expectProblem(t, s, "state", "last history record")
		if _, err := s.VerifySession(t.Context(), "p"); !errors.Is(err, model.ErrCorrupt) {
			t.Fatalf("VerifySession of a changed state: %v", err)
		}
	})
	t.Run("undo entry moved without a record", func(t *testing.T) {
		s, id := seededWithCommand(t)
		tamper(t, s, func(tx *bolt.Tx) error {
			u, err := getUndoOf(plainTx(tx), "c", id)
			if err != nil || u == nil {
				return fmt.Errorf("undo entry: %v", err)
			}
			u.State = sm.EntryCompensated
			return putRecord(&writeTx{Tx: tx}, bUndo, nameKey("c", id), u)
		})
		expectProblem(t, s, "state", `undo entry is "compensated" but its history says "pending"`)
		if err := effectlog.CheckEffect(must[model.EffectDetail](t)(s.GetEffect(t.Context(), id))); !errors.Is(err, model.ErrCorrupt) {
			t.Fatalf("effectlog.CheckEffect of an entry moved without a record: %v", err)
		}
	})
	t.Run("signature that its args do not give", func(t *testing.T) {
		s, id := seeded(t)
		other := model.Signature("s", "write", []byte(`{"a":2}`), "")
		editEffect(t, s, id, func(e *model.Effect) { e.CallSignature = other })
		expectProblem(t, s, "signature", "does not match its args")
	})
}

// seededWithCommand is a log with one committed effect of session c whose
// compensation is a command.
func seededWithCommand(t *testing.T) (*testLog, uint64) {
	s, _ := newStore(t)
	res := must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "c", Tool: "write", Tier: sm.Compensable,
		Args: json.RawMessage(`{"path":"/srv/app.conf"}`), CreateSession: true,
		Compensation: &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"git", "/srv", "checkout", "app.conf"}}}))
	must[model.Effect](t)(s.Start(t.Context(), res.Effect.ID, model.Change{}))
	must[model.Effect](t)(s.Commit(t.Context(), res.Effect.ID, model.Change{Result: json.RawMessage(`{"bytes":512}`)}))
	verifyClean(t, s)
	return s, res.Effect.ID
}

// A session record that cannot be read is not made anew by a call that
// may create its session: the call fails (ErrCorrupt) and the record stays.
func TestInterceptDoesNotRecreateADamagedSession(t *testing.T) {
	s, _ := newStore(t)
	intercept(t, s, "s", "w", sm.Compensable, `1`)
	tamper(t, s, func(tx *bolt.Tx) error { return tx.Bucket(bSessions).Put([]byte("s"), []byte{0x02, 'S', 0xff}) })
	_, err := s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "w", Tier: sm.Compensable,
		Args: json.RawMessage(`2`), CreateSession: true})
	if !errors.Is(err, model.ErrCorrupt) {
		t.Fatalf("intercept into a damaged session: %v", err)
	}
	s.pause()()
	db, err := bolt.Open(s.Path(), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bSessions).Get([]byte("s")); !bytes.Equal(v, []byte{0x02, 'S', 0xff}) {
			t.Errorf("the damaged record became %x", v)
		}
		return nil
	})
}

// Verify gives back the file's pages as it walks (dropPages): dropped after
// every record, it finds all it finds otherwise, and a clean log is clean.
func TestVerifyFindsTheSameDroppingItsPages(t *testing.T) {
	defer func(n int) { walkDropEvery = n }(walkDropEvery)
	walkDropEvery = 1
	TestVerifyDetectsTampering(t)
	TestVerifyChecksSchema6Indexes(t)
}

// A log path that is a symbolic link to nothing is refused, and nothing is
// made at its target (an empty file there would be refused for good).
func TestDanglingSymlinkIsNoLog(t *testing.T) {
	dir := t.TempDir()
	link, target := filepath.Join(dir, "link.db"), filepath.Join(dir, "target.db")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	e := New(link, Options{})
	err := e.Update(t.Context(), func(tx storage.WriteTx) error { return nil })
	if !errors.Is(err, model.ErrInvalidInput) || !strings.Contains(err.Error(), "symbolic link to "+target+", which does not exist") {
		t.Fatalf("a write through a link to nothing: %v", err)
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the link's target was made: %v", err)
	}
}

// A log path that is a symbolic link to a log is refused, to writers and
// readers alike: the journal is kept beside the path given, so through the
// link a call the log's journal holds read as new (a second effect, the
// call run twice), and a checkpoint of either journal would have left the
// other's acknowledged writes behind. Nothing is written, at the link or
// at the log.
func TestSymlinkedLogIsRefused(t *testing.T) {
	s, _ := newStore(t)
	first := intercept(t, s, "s", "w", sm.Compensable, `{"a":1}`)
	s.pause()()
	before := fileState(t, s)
	link := filepath.Join(t.TempDir(), "link.db")
	if err := os.Symlink(s.Path(), link); err != nil {
		t.Fatal(err)
	}
	through := newTestLog(link, testOptions{})
	t.Cleanup(func() { through.pause() })
	res, err := through.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "w", Tier: sm.Compensable, Args: json.RawMessage(`{"a":1}`), CreateSession: true})
	if !errors.Is(err, model.ErrInvalidInput) || !strings.Contains(err.Error(), link+" is a symbolic link to "+s.Path()) || strings.Contains(err.Error(), "\n") {
		t.Errorf("a write through the link: %v (outcome %s, effect %d; the log holds effect %d)", err, res.Outcome, res.Effect.ID, first.Effect.ID)
	}
	if _, _, err := through.ListEffects(t.Context(), effectlog.EffectFilter{}); !errors.Is(err, model.ErrInvalidInput) {
		t.Errorf("a read through the link: %v", err)
	}
	through.pause()()
	if _, err := os.Lstat(link + JournalSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a journal was made beside the link: %v", err)
	}
	if fileState(t, s) != before {
		t.Error("the log or its journal changed")
	}
}

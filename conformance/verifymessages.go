package conformance

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage"
)

// A verify problem that compares two things shows both as they differ:
// each case changes one behind the rules so that the two read alike where
// they are cut short (a hash past its 12th character), rounded (a time not
// shown) or printed as they are (a letter of another alphabet that looks
// the same). Each side verify prints must be plain printable ASCII, and
// the two must differ, and the problem short however long the values.
func testVerifyTellsTheSidesApart(t *testing.T, open opener) {
	const (
		cyrillicA = "\u0430" // looks like a
		cyrillicO = "\u043e" // looks like o
		cyrillicE = "\u0435" // looks like e
	)
	effect := func(change func(e *model.Effect)) func(tx storage.WriteTx, id uint64) error {
		return func(tx storage.WriteTx, id uint64) error {
			e, err := tx.Effect(id)
			if err != nil {
				return err
			}
			from := e.State
			change(&e)
			return tx.PutEffect(&e, from)
		}
	}
	approval := func(change func(a *model.Approval)) func(tx storage.WriteTx, id uint64) error {
		return func(tx storage.WriteTx, id uint64) error {
			a, err := tx.Approval(id)
			if err != nil || a == nil {
				return fmt.Errorf("approval %v: %v", a, err)
			}
			change(a)
			return tx.PutApproval(a)
		}
	}
	session := func(change func(s *model.Session)) func(tx storage.WriteTx, id uint64) error {
		return func(tx storage.WriteTx, id uint64) error {
			sess, err := tx.Session("run")
			if err != nil {
				return err
			}
			change(&sess)
			return tx.PutSession(&sess)
		}
	}
	decision := regexp.MustCompile(`the request says (.+?), the (?:effect's )?history (.+?)(?:;|$)`)
	for name, c := range map[string]struct {
		tier    sm.Tier
		session bool // the problem is the session's, not the effect's
		tamper  func(tx storage.WriteTx, id uint64) error
		sides   *regexp.Regexp
	}{
		"history head past its 12th character": {sm.Compensable, false, effect(func(e *model.Effect) {
			h := []byte(e.HistoryHead)
			h[20] ^= 1
			e.HistoryHead = string(h)
		}), regexp.MustCompile(`ending (\S+); the record pins \d+ ending (\S+)$`)},
		"effect state, a lookalike": {sm.Compensable, false, effect(func(e *model.Effect) { e.State = sm.State("c" + cyrillicO + "mmitted") }),
			regexp.MustCompile(`^state is (.+) but the last history record says (.+)$`)},
		"undo entry state, a lookalike": {sm.Compensable, false, func(tx storage.WriteTx, id uint64) error {
			e, err := tx.Effect(id)
			if err != nil {
				return err
			}
			u, err := tx.Undo(e.Session, id, &e)
			if err != nil || u == nil {
				return fmt.Errorf("undo entry %v: %v", u, err)
			}
			u.State = sm.EntryState("p" + cyrillicE + "nding")
			return tx.PutUndo(u)
		}, regexp.MustCompile(`^undo entry is (.+) but its history says (.+)$`)},
		"session state, a lookalike": {sm.Compensable, true, session(func(s *model.Session) { s.State = sm.SessionState(cyrillicA + "ctive") }),
			regexp.MustCompile(`^state is (.+) but the last history record says (.+)$`)},
		"approval time, a microsecond later": {sm.Irreversible, false, approval(func(a *model.Approval) { *a.DecidedAt = a.DecidedAt.Add(time.Microsecond) }), decision},
		"approver, a lookalike":              {sm.Irreversible, false, approval(func(a *model.Approval) { a.DecidedBy = cyrillicA + "lice" }), decision},
		"request reason":                     {sm.Irreversible, false, approval(func(a *model.Approval) { a.Reason = "refund " + cyrillicO + "rder 17" }), decision},
		// A reason of any length: the line shows where it differs, not all of it.
		"request reason, long": {sm.Irreversible, false, approval(func(a *model.Approval) { a.Reason = strings.Repeat("refund order 17 ", 8192) }), decision},
		"request args": {sm.Irreversible, false, approval(func(a *model.Approval) { a.Args = json.RawMessage(`{"to":"b` + cyrillicO + `b"}`) }),
			regexp.MustCompile(`^the request's args differ from the effect's \(from byte \d+: (.+), the effect's (.+)\)$`)},
		"call signature past its 16th character": {sm.Compensable, false, effect(func(e *model.Effect) {
			sig := []byte(e.CallSignature)
			sig[40] ^= 1
			e.CallSignature = string(sig)
		}), regexp.MustCompile(`^call signature does not match its args: it is (\S+), its args give (\S+)$`)},
	} {
		t.Run(name, func(t *testing.T) {
			s, _ := open(t)
			var compensation *model.Compensation
			if c.tier == sm.Compensable {
				compensation = &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"refund", "bob"}}
			}
			id := must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "run", Tool: "pay", Tier: c.tier,
				Args: json.RawMessage(`{"to":"bob"}`), CreateSession: true, Actor: "tester", Reason: "refund order 17",
				Compensation: compensation})).Effect.ID
			if c.tier == sm.Irreversible {
				must[model.Effect](t)(s.Approve(t.Context(), id, model.Change{Actor: "alice"}))
			}
			must[model.Effect](t)(s.Start(t.Context(), id, model.Change{}))
			must[model.Effect](t)(s.Commit(t.Context(), id, model.Change{Result: json.RawMessage(`{"paid":10}`)}))
			verifyClean(t, s)
			behindTheRules(t, s, func(tx storage.WriteTx) error { return c.tamper(tx, id) })
			rep := must[effectlog.VerifyReport](t)(s.Verify(t.Context()))
			var found []string
			for _, p := range rep.Problems {
				if c.session && p.Session != "run" || !c.session && p.Effect != id {
					continue
				}
				found = append(found, p.Detail)
				m := c.sides.FindStringSubmatch(p.Detail)
				if m == nil {
					continue
				}
				if m[1] == m[2] || !plainASCII(m[1]) || !plainASCII(m[2]) {
					t.Fatalf("verify says %q: its sides %q and %q do not read apart", p.Detail, m[1], m[2])
				}
				if len(p.Detail) > 400 {
					t.Fatalf("verify says %d bytes of one problem, sides %.200q and %.200q: not a line that reads", len(p.Detail), m[1], m[2])
				}
				return
			}
			t.Fatalf("verify did not compare the two sides (%v): %q", c.sides, found)
		})
	}
}

// plainASCII says whether s is printable ASCII only: what a reader sees of
// it is what it holds.
func plainASCII(s string) bool {
	for _, c := range []byte(s) {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

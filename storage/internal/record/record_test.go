package record

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// word draws a token sometimes and any string otherwise.
func word(t *rapid.T, label string) string {
	if rapid.Bool().Draw(t, label+"?") {
		return rapid.SampledFrom(tokens).Draw(t, label)
	}
	return rapid.String().Draw(t, label)
}

func drawHash(t *rapid.T, label string) string {
	if rapid.Bool().Draw(t, label+"?") {
		return hex.EncodeToString(rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, label))
	}
	return rapid.String().Draw(t, label)
}

func drawTime(t *rapid.T, label string) time.Time {
	if rapid.Bool().Draw(t, label+"?") {
		return time.Time{}
	}
	return time.Unix(0, rapid.Int64().Draw(t, label))
}

func drawTimePtr(t *rapid.T, label string) *time.Time {
	if rapid.Bool().Draw(t, label+"?") {
		return nil
	}
	v := drawTime(t, label)
	return &v
}

func drawRaw(t *rapid.T, label string) json.RawMessage {
	if rapid.Bool().Draw(t, label+"?") {
		return nil
	}
	return json.RawMessage(rapid.SliceOf(rapid.Byte()).Draw(t, label))
}

func drawStrings(t *rapid.T, label string) []string {
	l := rapid.SliceOfN(rapid.String(), 0, 4).Draw(t, label)
	if len(l) == 0 {
		return nil
	}
	return l
}

func drawCompensation(t *rapid.T) model.Compensation {
	return model.Compensation{Kind: word(t, "kind"), Argv: drawStrings(t, "argv"), Dir: rapid.String().Draw(t, "dir"),
		Tool: rapid.String().Draw(t, "ctool"), Args: drawRaw(t, "cargs"), Capture: drawRaw(t, "capture"),
		Note: rapid.String().Draw(t, "note"), MaxRetries: rapid.Int().Draw(t, "retries"), InitialBackoffMS: rapid.Int().Draw(t, "backoff")}
}

// TestRecordCodecRoundTrip: every field of every binary record comes back as
// it went in, whatever its value.
func TestRecordCodecRoundTrip(t *testing.T) {
	roundTrip := func(t *rapid.T, in, out any) {
		data, err := Encode(in)
		if err != nil {
			t.Fatal(err)
		}
		if data[0] != recordBinary3 {
			t.Fatalf("%T not stored in binary form", in)
		}
		if err := Decode(data, out); err != nil {
			t.Fatalf("decode: %v", err)
		}
		if got := reflect.ValueOf(out).Elem().Interface(); !reflect.DeepEqual(got, reflect.ValueOf(in).Elem().Interface()) {
			t.Fatalf("round trip changed the record:\n in  %+v\n out %+v", in, got)
		}
	}
	t.Run("effect", rapid.MakeCheck(func(t *rapid.T) {
		e := &model.Effect{ID: rapid.Uint64().Draw(t, "id"), Session: rapid.String().Draw(t, "session"), Tool: rapid.String().Draw(t, "tool"),
			Tier: sm.Tier(word(t, "tier")), State: sm.State(word(t, "state")), CallSignature: drawHash(t, "sig"),
			Args: drawRaw(t, "args"), Result: drawRaw(t, "result"), Error: rapid.String().Draw(t, "error"),
			ReplayCount: rapid.Int().Draw(t, "replays"), LastReplayedAt: drawTimePtr(t, "replayed"), Key: rapid.String().Draw(t, "key"),
			Redact: drawStrings(t, "redact"), CreatedAt: drawTime(t, "created"), UpdatedAt: drawTime(t, "updated"),
			HistoryLen: rapid.Uint32().Draw(t, "hlen"), HistoryHead: drawHash(t, "head")}
		if rapid.Bool().Draw(t, "replay?") {
			v := rapid.Uint64().Draw(t, "replay_of")
			e.ReplayOf = &v
		}
		if rapid.Bool().Draw(t, "comp?") {
			c := drawCompensation(t)
			e.Compensation = &c
		}
		if rapid.Bool().Draw(t, "owner?") {
			e.Owner = drawOwner(t)
		}
		roundTrip(t, e, &model.Effect{ReplayCount: 99})
	}))
	t.Run("history", rapid.MakeCheck(func(t *rapid.T) {
		// The effect id, session and prev_hash are implied by where the record is, not stored.
		h := &model.HistoryRecord{Seq: rapid.Uint32().Draw(t, "seq"), Kind: word(t, "kind"), From: word(t, "from"), To: word(t, "to"), Trigger: word(t, "trigger"),
			Actor: word(t, "actor"), Reason: rapid.String().Draw(t, "reason"), Error: rapid.String().Draw(t, "error"),
			At: drawTime(t, "at"), Hash: drawHash(t, "hash"), Role: rapid.String().Draw(t, "role")}
		if _, raw := RawHash(h.Hash); raw && rapid.Bool().Draw(t, "content?") {
			h.HashVersion = model.HashWithContent
		}
		roundTrip(t, h, &model.HistoryRecord{})
	}))
	t.Run("undo", rapid.MakeCheck(func(t *rapid.T) {
		// The effect id, session, tool and compensation are the effect's, not stored.
		u := &model.UndoEntry{State: sm.EntryState(word(t, "state")), Attempts: rapid.Int().Draw(t, "attempts"),
			LastError: rapid.String().Draw(t, "error"), CreatedAt: drawTime(t, "created"), UpdatedAt: drawTime(t, "updated")}
		if rapid.Bool().Draw(t, "owner?") {
			u.Owner = drawOwner(t)
		}
		roundTrip(t, u, &model.UndoEntry{})
	}))
	t.Run("approval", rapid.MakeCheck(func(t *rapid.T) {
		a := &model.Approval{EffectID: rapid.Uint64().Draw(t, "id"), Session: rapid.String().Draw(t, "session"), Tool: rapid.String().Draw(t, "tool"),
			Args: drawRaw(t, "args"), Reason: rapid.String().Draw(t, "reason"), ApprovalRound: model.ApprovalRound{RequestedAt: drawTime(t, "requested"),
				ExpiresAt: drawTimePtr(t, "expires"), Outcome: word(t, "outcome"), DecidedBy: word(t, "by"),
				DecidedAt: drawTimePtr(t, "decided"), Decision: rapid.String().Draw(t, "decision")}}
		for i := rapid.IntRange(0, 3).Draw(t, "rounds"); i > 0; i-- {
			a.Earlier = append(a.Earlier, model.ApprovalRound{RequestedAt: drawTime(t, "r.requested"), ExpiresAt: drawTimePtr(t, "r.expires"),
				Outcome: word(t, "r.outcome"), DecidedBy: word(t, "r.by"), DecidedAt: drawTimePtr(t, "r.decided"),
				Decision: rapid.String().Draw(t, "r.decision")})
		}
		roundTrip(t, a, &model.Approval{})
	}))
	t.Run("session", rapid.MakeCheck(func(t *rapid.T) {
		s := &model.Session{ID: rapid.String().Draw(t, "id"), State: sm.SessionState(word(t, "state")), Reason: rapid.String().Draw(t, "reason"),
			CreatedAt: drawTime(t, "created"), UpdatedAt: drawTime(t, "updated"), Effects: rapid.Int().Draw(t, "effects"),
			PendingApprovals: rapid.Int().Draw(t, "pending"), Upstream: drawStrings(t, "upstream"), UpstreamDir: rapid.String().Draw(t, "upstream dir"),
			HistoryLen: rapid.Uint32().Draw(t, "hlen"), HistoryHead: drawHash(t, "head"), Seq: rapid.Uint64().Draw(t, "seq")}
		if rapid.Bool().Draw(t, "meta?") {
			s.Meta = rapid.MapOf(rapid.String(), rapid.String()).Draw(t, "meta")
		}
		if rapid.Bool().Draw(t, "counts?") {
			s.Counts = map[sm.State]int{}
			for _, st := range rapid.SliceOfN(rapid.SampledFrom(tokens), 0, 5).Draw(t, "counted") {
				s.Counts[sm.State(st)] = rapid.Int().Draw(t, "count")
			}
		}
		roundTrip(t, s, &model.Session{})
	}))
}

// TestRecordCodecReadsJSON: records of logs written before the binary form
// are JSON and still read.
func TestRecordCodecReadsJSON(t *testing.T) {
	var e model.Effect
	old := `{"id":7,"session":"ci","tool":"deploy","tier":"compensable","state":"committed","args":{"a":1},"created_at":"2026-11-29T10:00:00Z"}`
	if err := Decode([]byte(old), &e); err != nil {
		t.Fatal(err)
	}
	if e.ID != 7 || e.State != sm.Committed || string(e.Args) != `{"a":1}` || e.CreatedAt.Year() != 2026 {
		t.Fatalf("%+v", e)
	}
}

// TestRecordCodecRefusesDamage: truncated, extended or mistyped records are
// errors, never panics or silent garbage.
func TestRecordCodecRefusesDamage(t *testing.T) {
	data, err := Encode(&model.Effect{ID: 1, Session: "s", Tool: "t", Tier: sm.Compensable, State: sm.Pending,
		Args: json.RawMessage(`{"a":1}`), CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	for i := 2; i < len(data); i++ {
		var e model.Effect
		if Decode(data[:i], &e) == nil {
			t.Fatalf("a record cut to %d of %d bytes decoded", i, len(data))
		}
	}
	var e model.Effect
	if Decode(append(append([]byte{}, data...), 0), &e) == nil {
		t.Fatal("a record with a trailing byte decoded")
	}
	var h model.HistoryRecord
	if Decode(data, &h) == nil {
		t.Fatal("an effect record decoded as a history record")
	}
}

// A history record without a role is stored as before roles, byte for byte
// (a log file's records, and every record written before); with one, the
// role follows the hash.
func TestHistoryRoleIsAnOptionalTail(t *testing.T) {
	h := model.HistoryRecord{Seq: 2, Kind: model.KindEffect, From: "pending", To: "approved", Trigger: "Human approves via dashboard",
		Actor: "alice", At: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), HashVersion: model.HashWithContent,
		Hash: "0214342757ab5bc09c10e640bb979f29e79c84d987006158a88de467c221b8cf"}
	without, err := Encode(&h)
	if err != nil {
		t.Fatal(err)
	}
	// As the undolog before roles stored it (in form 2; only the form byte
	// has changed since), and that record reads back without a role.
	const pinned = "0248020d0107200005616c696365000001808092a4adb98ced31020214342757ab5bc09c10e640bb979f29e79c84d987006158a88de467c221b8cf"
	if got := hex.EncodeToString(without); got[2:] != pinned[2:] {
		t.Fatalf("a record without a role is stored as\n%s, want\n%s", got, pinned)
	}
	old, _ := hex.DecodeString(pinned)
	var read model.HistoryRecord
	if err := Decode(old, &read); err != nil || read.Role != "" {
		t.Fatalf("the record of before roles reads as %+v (%v)", read, err)
	}
	if again, _ := Encode(&read); !bytes.Equal(again, without) {
		t.Fatalf("the record of before roles reads as %+v, not as written", read)
	}
	h.Role = "alice_db"
	with, err := Encode(&h)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(with[:len(without)], without) || string(with[len(without)+1:]) != "alice_db" {
		t.Fatalf("role not a tail: %x", with)
	}
	var back model.HistoryRecord
	if err := Decode(with[:len(with)-1], &back); err == nil {
		t.Fatal("a role cut short decoded")
	}
}

// TestTokensOnlyGrow pins the token table: records on disk name tokens by
// index, so an entry may be added at the end but never moved or changed.
func TestTokensOnlyGrow(t *testing.T) {
	frozen := []string{
		"pending", "executing", "committed", "compensating", "compensated", "compensation_failed",
		"approved", "rejected", "replayed", "safe", "compensable", "irreversible",
		"effect", "undo", "session", "skipped", "resolved",
		"active", "awaiting_approval", "completed", "failed", "halted",
		"command", "mcp", "manual", "timed_out", "unknown", "system:timeout",
		"Intercept", "Session created", "Intercept → Execute", "Human approves via dashboard",
		"Human rejects via dashboard", "Intercept → Replay", "Commit RPC", "Fail RPC",
		"Saga orchestrator on session failure", "Proxy resumes tool call", "Compensation succeeds",
		"Compensation exhausted retries",
	}
	if len(tokens) < len(frozen) || !reflect.DeepEqual(tokens[:len(frozen)], frozen) {
		t.Fatalf("the token table changed; add new tokens at its end only:\n%q", tokens)
	}
	seen := map[string]bool{}
	for _, tok := range tokens {
		if seen[tok] {
			t.Fatalf("token %q is listed twice", tok)
		}
		seen[tok] = true
	}
}

func drawOwner(t *rapid.T) *model.Owner {
	return &model.Owner{PID: rapid.Int().Draw(t, "pid"), Host: rapid.String().Draw(t, "host"), StartedAt: drawTime(t, "started"),
		ProcessStart: rapid.Uint64().Draw(t, "process start"), LeaseUntil: drawTime(t, "lease")}
}

// Records of form 2, written before leases, end after the owner's start
// time: they read with no lease, and one cut short of it is still an error.
func TestForm2RecordsReadWithoutALease(t *testing.T) {
	owner := &model.Owner{PID: 7, Host: "m1", StartedAt: time.Unix(100, 0), ProcessStart: 42}
	e := &model.Effect{ID: 1, Session: "s", Tool: "t", Tier: "compensable", State: "executing", Owner: owner}
	data, err := Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	// Without a lease, form 3 adds one byte (a zero time) at the end.
	form2 := append([]byte{recordBinary2}, data[1:len(data)-1]...)
	var back model.Effect
	if err := Decode(form2, &back); err != nil {
		t.Fatal(err)
	}
	if !back.Owner.Same(owner) || !back.Owner.LeaseUntil.IsZero() {
		t.Fatalf("form 2 effect: owner %+v", back.Owner)
	}
	if err := Decode(form2[:len(form2)-1], &back); err == nil {
		t.Fatal("a form 2 effect record cut short decoded")
	}
	u := &model.UndoEntry{State: "compensating", Owner: owner}
	if data, err = Encode(u); err != nil {
		t.Fatal(err)
	}
	form2 = append([]byte{recordBinary2}, data[1:len(data)-1]...)
	var backU model.UndoEntry
	if err := Decode(form2, &backU); err != nil || !backU.Owner.Same(owner) || !backU.Owner.LeaseUntil.IsZero() {
		t.Fatalf("form 2 undo entry: %+v %v", backU.Owner, err)
	}
	// With a lease, form 3 keeps it.
	leased := owner.WithLease(time.Unix(200, 5))
	e.Owner = leased
	if data, err = Encode(e); err != nil {
		t.Fatal(err)
	}
	if err := Decode(data, &back); err != nil || !back.Owner.LeaseUntil.Equal(leased.LeaseUntil) {
		t.Fatalf("form 3 effect: %+v %v", back.Owner, err)
	}
}

package pgstore_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage/pgstore"
)

// The role checks of the schema compare the trigger texts of history
// rows: each text they compare is one statemachine defines as persisted,
// and all of those are compared. A text changed on one side only would
// let an agent make an approver's move, or refuse it its own.
func TestSchemaComparesStatemachineTriggers(t *testing.T) {
	column := regexp.MustCompile(`(?i)\b(?:new|old|h)\.trigger\b`)
	comparison := regexp.MustCompile(`(?i)^\s*(?:=|<>|!=|is\s+(?:not\s+)?distinct\s+from)\s*'((?:[^']|'')*)'`)
	inList := regexp.MustCompile(`(?i)^\s*(?:not\s+)?in\s*\(([^)]*)\)`)
	literal := regexp.MustCompile(`'((?:[^']|'')*)'`)
	compared := map[string]bool{}
	for i, m := range pgstore.Migrations {
		for _, at := range column.FindAllStringIndex(m, -1) {
			rest := m[at[1]:]
			var texts []string
			if c := comparison.FindStringSubmatch(rest); c != nil {
				texts = []string{c[1]}
			} else if l := inList.FindStringSubmatch(rest); l != nil {
				for _, lit := range literal.FindAllStringSubmatch(l[1], -1) {
					texts = append(texts, lit[1])
				}
			} else {
				line, _, _ := strings.Cut(rest, "\n")
				t.Errorf("migration %d reads %s%s in a way this test cannot read: make it a comparison with a literal", i+1, m[at[0]:at[1]], line)
			}
			for _, text := range texts {
				compared[strings.ReplaceAll(text, "''", "'")] = true
			}
		}
	}
	persisted := []string{sm.TriggerFail, sm.TriggerResolvedInDoubt, sm.TriggerSessionResumed, sm.TriggerSessionCompensationFailed}
	for text := range compared {
		if !slices.Contains(persisted, text) {
			t.Errorf("the schema compares trigger %q, which statemachine does not define as persisted", text)
		}
	}
	for _, text := range persisted {
		if !compared[text] {
			t.Errorf("statemachine defines trigger %q as compared by PostgreSQL, and no migration compares it", text)
		}
	}
	// The texts are the tables' own: a move records its row's trigger.
	var rows []string
	for _, r := range sm.Transitions() {
		rows = append(rows, r.Trigger)
	}
	for _, r := range sm.SessionTransitions() {
		rows = append(rows, r.Trigger)
	}
	for _, text := range []string{sm.TriggerFail, sm.TriggerSessionResumed, sm.TriggerSessionCompensationFailed} {
		if !slices.Contains(rows, text) {
			t.Errorf("trigger %q is in no row of statemachine's tables", text)
		}
	}
}

package model

import "fmt"

// Problem is one inconsistency verify found: in a record, a history, an
// index, a count.
type Problem struct {
	Kind    string `json:"kind"`
	Effect  uint64 `json:"effect,omitempty"`
	Session string `json:"session,omitempty"`
	Detail  string `json:"detail"`
}

func (p Problem) String() string {
	where := ""
	switch {
	case p.Effect != 0:
		where = fmt.Sprintf("effect %d: ", p.Effect)
	case p.Session != "":
		where = fmt.Sprintf("session %s: ", p.Session)
	}
	return fmt.Sprintf("%s: %s%s", p.Kind, where, p.Detail)
}

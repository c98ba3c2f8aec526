package agenthook

// Registering the hook in a project's .claude/settings.json: the user's
// own settings and hooks are kept as they are, in their order; undolog's
// entries are found again by their command and updated in place, so that
// installing twice changes nothing.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// HookCommand is how undolog's entries started before they named
// undolog by its absolute path: such an entry is undolog's too, and an
// install upgrades it.
const HookCommand = "undolog hook"

// IsHookEntry tells whether a hook entry's command is undolog's: `undolog
// hook ...`, or the same with undolog's absolute path (quoted or not).
func IsHookEntry(command string) bool {
	if strings.HasPrefix(command, HookCommand) {
		return true
	}
	i := strings.Index(command, " hook")
	if i < 0 || (len(command) > i+5 && command[i+5] != ' ') {
		return false
	}
	bin := strings.Trim(command[:i], "'")
	return filepath.IsAbs(bin) && filepath.Base(bin) == "undolog"
}

// Registration is one hook entry of undolog's: its event, command line and
// timeout in seconds.
type Registration struct {
	Event   string
	Command string
	Timeout int
}

// object is a JSON object with its keys in their order and its values as
// written.
type object struct {
	keys []string
	vals map[string]json.RawMessage
}

func parseObject(data []byte, what string) (*object, error) {
	o := &object{vals: map[string]json.RawMessage{}}
	if len(bytes.TrimSpace(data)) == 0 {
		return o, nil
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	// Claude Code reads settings with comments; what is not JSON here is
	// most often that.
	unreadable := func(err error) error {
		if bytes.Contains(data, []byte("//")) || bytes.Contains(data, []byte("/*")) {
			return fmt.Errorf("%s: %v (comments, JSONC, are not rewritten: take them out, or add the hooks by hand)", what, err)
		}
		return fmt.Errorf("%s: %v", what, err)
	}
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		if err != nil {
			return nil, unreadable(err)
		}
		return nil, fmt.Errorf("%s is not a JSON object", what)
	}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, unreadable(err)
		}
		k := t.(string)
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return nil, unreadable(fmt.Errorf("%s: %v", k, err))
		}
		if _, dup := o.vals[k]; dup {
			// Which one Claude Code reads is its parser's business: the
			// file is refused rather than one of the two dropped.
			return nil, fmt.Errorf("%s has the key %q twice", what, k)
		}
		o.keys = append(o.keys, k)
		o.vals[k] = v
	}
	if _, err := d.Token(); err != nil {
		return nil, unreadable(err)
	}
	if _, err := d.Token(); err == nil {
		return nil, fmt.Errorf("%s: more after its object", what)
	}
	return o, nil
}

func (o *object) set(k string, v json.RawMessage) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func (o *object) marshal() []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(o.vals[k])
	}
	b.WriteByte('}')
	return b.Bytes()
}

// Install adds regs to the settings (a settings.json's bytes; empty: none
// yet), or updates undolog's entries already there: the settings as they
// are to be written, and whether they changed. Everything else is kept.
func Install(settings []byte, regs []Registration) ([]byte, bool, error) {
	top, err := parseObject(settings, "the settings")
	if err != nil {
		return nil, false, err
	}
	hooks := &object{vals: map[string]json.RawMessage{}}
	if raw, ok := top.vals["hooks"]; ok {
		if hooks, err = parseObject(raw, "the settings' hooks"); err != nil {
			return nil, false, err
		}
	}
	for _, reg := range regs {
		var groups []json.RawMessage
		if raw, ok := hooks.vals[reg.Event]; ok {
			if err := json.Unmarshal(raw, &groups); err != nil {
				return nil, false, fmt.Errorf("the settings' hooks.%s is not a list of matcher groups: %v", reg.Event, err)
			}
		}
		ours, err := marshal(struct {
			Type    string `json:"type"`
			Command string `json:"command"`
			Timeout int    `json:"timeout"`
		}{"command", reg.Command, reg.Timeout})
		if err != nil {
			return nil, false, err
		}
		found := false
		for gi, graw := range groups {
			g, err := parseObject(graw, "a matcher group of hooks."+reg.Event)
			if err != nil {
				return nil, false, err
			}
			var list []json.RawMessage
			if json.Unmarshal(g.vals["hooks"], &list) != nil {
				continue
			}
			for i, h := range list {
				var e struct {
					Command string `json:"command"`
				}
				if json.Unmarshal(h, &e) == nil && IsHookEntry(e.Command) && !found {
					list[i], found = ours, true
					b, err := marshal(list)
					if err != nil {
						return nil, false, err
					}
					g.set("hooks", b)
					groups[gi] = g.marshal()
				}
			}
		}
		if !found {
			groups = append(groups, json.RawMessage(`{"matcher":"*","hooks":[`+string(ours)+`]}`))
		}
		raw, err := marshal(groups)
		if err != nil {
			return nil, false, err
		}
		hooks.set(reg.Event, raw)
	}
	top.set("hooks", hooks.marshal())
	var out bytes.Buffer
	if err := json.Indent(&out, top.marshal(), "", "  "); err != nil {
		return nil, false, err
	}
	out.WriteByte('\n')
	same, err := sameJSON(settings, out.Bytes())
	return out.Bytes(), !same, err
}

// sameJSON tells whether two settings say the same (a file written by
// hand in another layout included).
func sameJSON(a, b []byte) (bool, error) {
	if len(bytes.TrimSpace(a)) == 0 {
		return false, nil
	}
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		return false, errors.New("the settings are not JSON")
	}
	if err := json.Unmarshal(b, &y); err != nil {
		return false, err
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb), nil
}

// marshal is v as JSON with < > & as they are: a hook's command line is
// read by people.
func marshal(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

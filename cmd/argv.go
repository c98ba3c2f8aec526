package cmd

import (
	"encoding/json"
	"strings"
)

// splitArgv turns a command written as one string into an argv, the way a
// POSIX shell splits words (single and double quotes, backslash escapes), but
// with no expansion of any kind: the result is run without a shell. A JSON
// array of strings is taken as the argv itself.
func splitArgv(s string) ([]string, error) {
	if t := strings.TrimSpace(s); strings.HasPrefix(t, "[") {
		var argv []string
		if err := json.Unmarshal([]byte(t), &argv); err != nil {
			return nil, usagef("command %q: not a JSON array of strings", s)
		}
		if len(argv) == 0 || argv[0] == "" {
			return nil, usagef("command %q is empty", s)
		}
		return argv, nil
	}
	var argv []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				argv = append(argv, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, usagef("command %q: unterminated single quote", s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`\n", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, usagef("command %q: unterminated double quote", s)
			}
			inWord = true
		case c == '\\':
			if i+1 < len(s) {
				i++
				cur.WriteByte(s[i])
			}
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		argv = append(argv, cur.String())
	}
	if len(argv) == 0 {
		return nil, usagef("command %q is empty", s)
	}
	return argv, nil
}

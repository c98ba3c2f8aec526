package mcpclient

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// A session records an HTTP upstream in its Upstream field as the proxy's
// own flags, ["--url", URL, "--header", "NAME=VARIABLE", ...]: no server
// command starts with "--", and the record holds header names and the names
// of the variables their values are read from, never the values.
const (
	urlFlag    = "--url"
	headerFlag = "--header"
)

// HeaderVar is a header whose value is read from an environment variable.
type HeaderVar struct {
	Name, Var string
}

// ParseHeaderVar reads "NAME=VARIABLE" (the --header flag).
func ParseHeaderVar(s string) (HeaderVar, error) {
	name, v, ok := strings.Cut(s, "=")
	name, v = strings.TrimSpace(name), strings.TrimSpace(v)
	if !ok || name == "" || v == "" || strings.ContainsAny(name, " \t:\r\n") || strings.ContainsAny(v, " \t=$\r\n") {
		return HeaderVar{}, fmt.Errorf("header %q: want NAME=ENV_VAR (the value is read from the environment variable ENV_VAR)", s)
	}
	return HeaderVar{Name: name, Var: v}, nil
}

// Remote is an MCP server reached over Streamable HTTP.
type Remote struct {
	URL     string
	Headers []HeaderVar
}

// CheckURL refuses what is not an http(s) URL, and credentials in it:
// the URL is recorded in the log, so they belong in a --header.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--url %q: want an http:// or https:// URL", raw)
	}
	if u.User != nil {
		return errors.New("--url: the URL holds credentials, and it is recorded in the log: pass them in a header read from the environment (--header 'Authorization=ENV_VAR')")
	}
	return nil
}

// Argv is the Upstream a session records for r.
func (r Remote) Argv() []string {
	argv := []string{urlFlag, r.URL}
	for _, h := range r.Headers {
		argv = append(argv, headerFlag, h.Name+"="+h.Var)
	}
	return argv
}

// ParseRemote reads an Upstream recorded by Argv; ok is false for a server
// command.
func ParseRemote(argv []string) (r Remote, ok bool, err error) {
	if len(argv) == 0 || argv[0] != urlFlag {
		return Remote{}, false, nil
	}
	if len(argv) < 2 || len(argv)%2 != 0 {
		return Remote{}, true, fmt.Errorf("recorded HTTP upstream %q is malformed", argv)
	}
	r.URL = argv[1]
	for i := 2; i < len(argv); i += 2 {
		if argv[i] != headerFlag {
			return Remote{}, true, fmt.Errorf("recorded HTTP upstream %q is malformed", argv)
		}
		h, err := ParseHeaderVar(argv[i+1])
		if err != nil {
			return Remote{}, true, err
		}
		r.Headers = append(r.Headers, h)
	}
	return r, true, nil
}

// Header reads the headers' values from the environment; a variable that is
// unset or empty is an error naming it (and never a value).
func (r Remote) Header(getenv func(string) string) (http.Header, error) {
	h := http.Header{}
	for _, hv := range r.Headers {
		v := getenv(hv.Var)
		if v == "" {
			return nil, fmt.Errorf("header %s: the environment variable %s is not set", hv.Name, hv.Var)
		}
		if strings.ContainsAny(v, "\r\n") {
			return nil, fmt.Errorf("header %s: the environment variable %s holds a line break", hv.Name, hv.Var)
		}
		h.Add(hv.Name, v)
	}
	return h, nil
}

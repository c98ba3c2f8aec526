package pgstore

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"
)

// passwordInDSN finds the password of a key=value address.
var passwordInDSN = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)(password\s*=\s*)('[^']*'|\S+)`) })

// Redacted is a log's address as undolog prints it (redactURL).
func Redacted(addr string) string { return redactURL(addr) }

// redactURL is a log's address fit to print: without its password; one
// that leaves the server to the PG* environment says which it names.
func redactURL(addr string) string {
	if fromEnvironment(addr) {
		if cfg, err := pgconn.ParseConfig(addr); err == nil {
			return environmentURL(cfg, true) + " (from the PG* environment)"
		}
	}
	if !strings.Contains(addr, "://") { // key=value
		return passwordInDSN().ReplaceAllString(addr, "${1}xxxxx")
	}
	u, err := url.Parse(addr)
	if err != nil {
		return "postgres://... (not shown: it does not parse as a URL, and may hold a password)"
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	return u.String()
}

// SharedAddress is the address by which another person reaches the same
// database: no user and no password (theirs are their own), and the server
// and database a PG* environment names written out.
func SharedAddress(addr string) string {
	if fromEnvironment(addr) {
		if cfg, err := pgconn.ParseConfig(addr); err == nil {
			return environmentURL(cfg, false)
		}
	}
	u, err := url.Parse(addr)
	if err != nil {
		return "postgres://... (not shown: it does not parse as a URL, and may hold a password)"
	}
	u.User = nil
	if q := u.Query(); q.Has("password") {
		q.Del("password")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// fromEnvironment reports whether addr leaves the server and database to
// the PG* environment (postgres://, as a PG* environment selects it).
func fromEnvironment(addr string) bool {
	u, err := url.Parse(addr)
	return err == nil && u.Host == "" && (u.Path == "" || u.Path == "/") && u.RawQuery == ""
}

// environmentURL is the URL of the server and database a PG* environment
// names, with its user or without; a socket directory goes in the query
// (postgres:///db?host=/run/postgresql&port=5432), where a URL can hold it.
func environmentURL(cfg *pgconn.Config, withUser bool) string {
	u := url.URL{Scheme: "postgres", Host: fmt.Sprintf("%s:%d", cfg.Host, cfg.Port), Path: "/" + cfg.Database}
	if len(cfg.Host) > 0 && cfg.Host[0] == '/' {
		u.Host = ""
		u.RawQuery = url.Values{"host": {cfg.Host}, "port": {fmt.Sprint(cfg.Port)}}.Encode()
	}
	if withUser && cfg.User != "" {
		u.User = url.User(cfg.User)
	}
	return u.String()
}

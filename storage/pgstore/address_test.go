package pgstore

import (
	"strings"
	"testing"
)

// A log's address, as errors print it, never shows a password: in the
// user part, in the query, or in a URL that does not parse.
func TestRedactURLShowsNoPassword(t *testing.T) {
	for _, addr := range []string{
		"postgres://ci:SECRET@db/undolog",
		"postgres://ci@db/undolog?password=SECRET&sslmode=require",
		"postgres://ci:cipw%ZZSECRET@127.0.0.1:5432/undolog",
		"host=db password=SECRET dbname=undolog",
	} {
		if got := redactURL(addr); strings.Contains(got, "SECRET") {
			t.Errorf("redactURL(%q) = %q", addr, got)
		}
	}
	if got := redactURL("postgres://ci@db/undolog?sslmode=require"); got != "postgres://ci@db/undolog?sslmode=require" {
		t.Errorf("an address without a password changed: %q", got)
	}
}

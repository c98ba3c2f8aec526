package template

import (
	"sync"

	"github.com/itchyny/gojq"
)

// query is one jq expression, parsed once and compiled once it is first
// run: a policy's conditions are asked again for every call (and for each
// command of a shell script), and gojq's Query.Run compiles the query
// anew on each run, most of a condition's cost.
type query struct {
	parsed  *gojq.Query
	err     error
	once    sync.Once
	code    *gojq.Code
	codeErr error
}

// queryLimit bounds how many expressions a process keeps: they come from
// policies, a few hundred at most; past it an expression is parsed each
// time, as before the cache.
const queryLimit = 4096

var (
	queriesMu sync.Mutex
	queries   = map[string]*query{}
)

// queryOf is expr parsed, kept for the next use.
func queryOf(expr string) *query {
	queriesMu.Lock()
	q, ok := queries[expr]
	queriesMu.Unlock()
	if ok {
		return q
	}
	q = &query{}
	q.parsed, q.err = gojq.Parse(expr)
	queriesMu.Lock()
	defer queriesMu.Unlock()
	if kept, ok := queries[expr]; ok {
		return kept
	}
	if len(queries) < queryLimit {
		queries[expr] = q
	}
	return q
}

// compiled is the query's code, compiled on its first use.
func (q *query) compiled() (*gojq.Code, error) {
	if q.err != nil {
		return nil, q.err
	}
	q.once.Do(func() { q.code, q.codeErr = gojq.Compile(q.parsed) })
	return q.code, q.codeErr
}

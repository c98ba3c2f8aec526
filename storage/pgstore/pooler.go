package pgstore

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// A connection pooler in transaction pooling mode (PgBouncer's
// pool_mode = transaction) hands each transaction whichever backend is
// free: what outlives a transaction on one backend (a prepared statement,
// LISTEN, SET, a session's advisory lock) is lost, or lands on another
// client's session. A URL that points at one says so, in parameters of
// undolog's own that are taken out before pgx sees the URL:
//
//	undolog_pooler=transaction   a write sets its lock_timeout with SET
//	                             LOCAL (statements are never prepared, on
//	                             any server: poolConfig)
//	undolog_listen_host=H        the listening connection goes to H (and
//	undolog_listen_port=P        P, 5432 if not given), the server itself,
//	                             as the same user
//	                             to the same database; without them waits
//	                             read the feed's newest position every
//	                             pollInterval through the pooler
//
// Whatever the URL, the engine takes its advisory locks for a transaction
// only (pg_advisory_xact_lock) and sets nothing for a session.
const (
	poolerParam     = "undolog_pooler"
	listenHostParam = "undolog_listen_host"
	listenPortParam = "undolog_listen_port"
)

// pollInterval is how often a wait behind a transaction pooler without a
// listening connection reads the feed's newest position.
const pollInterval = 50 * time.Millisecond

// pooling is what a URL's parameters say of a pooler in front of the server.
type pooling struct {
	transaction bool   // a pooler in transaction pooling mode
	listenHost  string // where the listening connection goes; "" with transaction: waits poll
	listenPort  uint16
}

// polls says that waits read the feed instead of listening.
func (p pooling) polls() bool { return p.transaction && p.listenHost == "" }

// takePooling removes undolog's parameters from those pgx would send to the
// server at the connection's start, and says what they ask.
func takePooling(cfg *pgconn.Config) (pooling, error) {
	params := cfg.RuntimeParams
	mode, hasMode := params[poolerParam]
	host, hasHost := params[listenHostParam]
	port, hasPort := params[listenPortParam]
	delete(params, poolerParam)
	delete(params, listenHostParam)
	delete(params, listenPortParam)
	var p pooling
	switch {
	case !hasMode:
		if hasHost || hasPort {
			return p, fmt.Errorf("%s and %s are for a URL that points at a pooler (%s=transaction)", listenHostParam, listenPortParam, poolerParam)
		}
		return p, nil
	case mode == "transaction":
		p.transaction = true
	case mode == "session":
		// A pooler in session mode keeps a backend for the whole
		// connection: nothing to do differently.
		if hasHost || hasPort {
			return p, fmt.Errorf("%s and %s are for a pooler in transaction mode: one in session mode carries LISTEN", listenHostParam, listenPortParam)
		}
		return p, nil
	default:
		return p, fmt.Errorf("%s=%q: want transaction or session (PgBouncer's pool_mode)", poolerParam, mode)
	}
	if name, ok := sessionSettings(params); ok {
		return p, fmt.Errorf("%s cannot be set in the URL of a pooler in transaction mode, which would drop it or leave it on a backend others share: set a server setting on the role (ALTER ROLE ... IN DATABASE ... SET name = value)", name)
	}
	switch {
	case hasPort && !hasHost:
		return p, fmt.Errorf("%s without %s", listenPortParam, listenHostParam)
	case !hasHost:
		return p, nil
	case !hasPort:
		port = "5432"
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return p, fmt.Errorf("%s=%q: want a port number", listenPortParam, port)
	}
	if host == "" {
		return p, fmt.Errorf("%s is empty: want the server's host name or socket directory", listenHostParam)
	}
	p.listenHost, p.listenPort = host, uint16(n)
	return p, nil
}

// sessionSettings finds a server setting among the parameters of the
// connection's start other than those PgBouncer keeps for each client.
func sessionSettings(params map[string]string) (string, bool) {
	for name := range params {
		switch strings.ToLower(name) {
		case "application_name", "client_encoding", "datestyle", "timezone", "standard_conforming_strings":
		default:
			return name, true
		}
	}
	return "", false
}

// Command execfloor is the floor of `undolog exec -- true` as its own
// process: it connects once, writes a call's record before it runs and
// its end after (two transactions, each sent as one batch, on the
// benchmark's floor tables), and exits.
//
//	execfloor URL SESSION N
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: execfloor URL SESSION N")
		os.Exit(2)
	}
	if err := run(context.Background(), os.Args[1], os.Args[2], os.Args[3]); err != nil {
		fmt.Fprintln(os.Stderr, "execfloor:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, url, session, n string) error {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return err
	}
	if !strings.Contains(url, "default_query_exec_mode") {
		// One round trip a batch, as undolog's first transactions: a
		// process that uses each statement once prepares none.
		cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	now := time.Now()
	sig := session + "/" + n
	var id int64
	begin := &pgx.Batch{}
	begin.Queue(`BEGIN`)
	begin.Queue(`INSERT INTO effects (session, tool, tier, state, call_signature, args, created_at, updated_at)
		VALUES ($1, 'true', 'compensable', 'executing', $2, $3, $4, $4) RETURNING id`, session, sig, []byte(`{"argv":["true"]}`), now).
		QueryRow(func(row pgx.Row) error { return row.Scan(&id) })
	begin.Queue(`INSERT INTO history VALUES (currval('effects_id_seq'), 1, NULL, 'pending', 'Intercept', 'bench', $1),
		(currval('effects_id_seq'), 2, 'pending', 'executing', 'Start', 'bench', $1)`, now)
	begin.Queue(`INSERT INTO changes (effect_id, seq) VALUES (currval('effects_id_seq'), 1), (currval('effects_id_seq'), 2)`)
	begin.Queue(`COMMIT`)
	if err := conn.SendBatch(ctx, begin).Close(); err != nil {
		return err
	}
	finish := &pgx.Batch{}
	finish.Queue(`BEGIN`)
	finish.Queue(`UPDATE effects SET state = 'committed', result = $2, updated_at = $3 WHERE id = $1`, id, []byte(`{"exit":0}`), now)
	finish.Queue(`INSERT INTO history VALUES ($1, 3, 'executing', 'committed', 'Commit', 'bench', $2)`, id, now)
	finish.Queue(`INSERT INTO changes (effect_id, seq) VALUES ($1, 3)`, id)
	finish.Queue(`COMMIT`)
	return conn.SendBatch(ctx, finish).Close()
}

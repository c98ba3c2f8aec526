package pgstore

// Migrations are the schema's migrations, for tests that make a database
// of an earlier schema.
var Migrations = migrations

// SynchronousCommit is the synchronous_commit setting of the write
// transaction tx (a storage.WriteTx of this engine's).
func SynchronousCommit(tx any) (string, error) {
	w := tx.(*writer)
	var v string
	err := w.tx.QueryRow(w.ctx, `SELECT current_setting('synchronous_commit')`).Scan(&v)
	return v, err
}
